"""Helpers several test modules share (once in integration/test_family_migrate.py)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragstore.db.connection import connect
from ragstore.families.migrate import migrate_family
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources


class HashBackend:
    """A deterministic fake model: unit vectors from sha256(model + text), counting what it embeds."""

    name = "fake"

    def __init__(self, model: str = "hash-a", dim: int = 8, delay: float = 0.0) -> None:
        self.model = model
        self.dim = dim
        self.delay = delay
        self.calls: list[str] = []

    def embed(self, texts: Sequence[str]) -> Any:
        self.calls.extend(texts)
        if self.delay:
            time.sleep(self.delay)
        return vectors_for(self.model, self.dim, texts)


def vectors_for(model: str, dim: int, texts: Sequence[str]) -> Any:
    out = np.empty((len(texts), dim), dtype=np.float32)
    for i, text in enumerate(texts):
        raw = hashlib.sha256(f"{model}\0{text}".encode()).digest() * (1 + dim // 32)
        row = np.frombuffer(raw[:dim], dtype=np.uint8).astype(np.float32) - 127.5
        out[i] = row / np.linalg.norm(row)
    return out


def write_jsonl(path: Path, n: int, prefix: str = "c", package: str = "pkg/a") -> Path:
    rows = [{"chunk_id": f"{prefix}{i:04d}", "package_path": package, "text": f"text {prefix} {i}"} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def index(conn: Any, path: Path, backend: Any = None) -> Any:
    return index_sources(conn, "docs", open_sources([str(path)]), backend=backend)


def _child(dsn: str) -> None:  # run in a subprocess by the kill -9 test
    with connect(dsn) as conn:
        migrate_family(conn, "docs", HashBackend(delay=0.05), batch_size=4)
