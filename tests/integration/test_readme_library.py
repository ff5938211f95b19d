"""The README's "Library" examples run as written, in order, against a fresh database."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def library_examples() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Library\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_library_section_has_sync_and_async_examples() -> None:
    blocks = library_examples()
    assert len(blocks) >= 2
    assert any("Store()" in b for b in blocks) and any("AsyncStore(" in b for b in blocks)


def test_the_library_examples_run(
    dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RAGSTORE_DSN", dsn)
    for block in library_examples():
        exec(compile(block, str(README), "exec"), {"__name__": "readme_example"})
    out = capsys.readouterr().out
    assert "notes: 3 inserted" in out
