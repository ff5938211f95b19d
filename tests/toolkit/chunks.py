"""Helpers several test modules share (once in integration/test_chunks.py)."""

from __future__ import annotations

from typing import Any

PACKAGES = ("guide/a.md", "guide/b.md", "guide_x/c.md", "ref/d.md")


def records(n: int = 24) -> list[dict[str, Any]]:
    return [
        {
            "chunk_id": f"c{i:02d}",
            "package_path": PACKAGES[i % len(PACKAGES)],
            "text": f"chunk {i} copies files to topic {i % 5}; delete moves words",
            "metadata": {"n": i, "lang": "en" if i % 2 else "fr", "x": 0.1 * i},
        }
        for i in range(n)
    ]
