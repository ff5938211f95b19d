"""Helpers several test modules share (once in integration/test_ingest_paths.py)."""

import json
from pathlib import Path

import numpy as np

DIM = 4


def vectors(n: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)


def rows(n: int, seed: int = 1, text: str = "text") -> list[dict]:
    m = vectors(n, seed)
    return [
        {
            "chunk_id": f"c{i:03d}",
            "package_path": f"pkg/{i % 3}",
            "text": f"{text} {i}",
            "metadata": {"n": i, "lang": "en" if i % 2 else "fr"},
            "vector": m[i].tolist(),
        }
        for i in range(n)
    ]


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def content(conn, family: str) -> list[tuple]:
    """Everything stored for the family's chunks but timestamps and the source hashes (which cover the
    family's name)."""
    return conn.execute(
        f"SELECT c.chunk_id, c.package_path, c.text, c.metadata, c.content_sha256, c.record_sha256, "
        f"c.source_sha256 IS NOT NULL, c.fts_config::text, c.tsv::text, e.embedding::text, e.model, e.package_path, "
        f"e.metadata, e.content_sha256 FROM ragstore.chunks c JOIN ragstore.emb_{family} e USING (chunk_id) "
        f"WHERE c.family = %s ORDER BY c.chunk_id",
        (family,),
    ).fetchall()
