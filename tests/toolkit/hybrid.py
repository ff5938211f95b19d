"""Helpers several test modules share (once in integration/test_hybrid.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ragstore import families
from ragstore.embed.offline import OfflineBackend
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.run import write_records


def unit(*xy: float) -> list[float]:
    v = np.zeros(16, dtype=np.float32)
    v[: len(xy)] = xy
    return [float(x) for x in v]


CHUNKS = [
    ("a", "p1/one", "apple apple banana", unit(0.8, 0.6), {"lang": "fr"}),
    ("b", "p2/two", "apple cherry", unit(-1.0), {"lang": "en"}),
    ("c", "p1/three", "grape", unit(1.0), {"lang": "fr"}),
    ("d", "p2/four", "melon", unit(0.0, 1.0), {"lang": "en"}),
]


QUERY = np.asarray(unit(1.0), dtype=np.float32)


@pytest.fixture
def family(conn: Any) -> families.Family:
    backend = OfflineBackend()
    fam = families.create_family(conn, "docs", backend)
    records = [
        (f"t:{i}", ChunkRecord(chunk_id=cid, package_path=pkg, text=text, vector=vec, metadata=meta))
        for i, (cid, pkg, text, vec, meta) in enumerate(CHUNKS)
    ]
    write_records(conn, fam, backend, records)
    return fam
