"""Helpers several test modules share (once in integration/test_search.py)."""

import numpy as np
import pytest

from ragstore import families
from ragstore.embed.offline import OfflineBackend
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.run import write_records


def load(conn, family, vectors, *, ids=None, packages=None, metadata=None):
    """Write rows with the given vectors (ids c00000.. unless given)."""
    n = len(vectors)
    ids = ids or [f"c{i:05d}" for i in range(n)]
    records = [
        (
            f"row {i}",
            ChunkRecord(
                chunk_id=ids[i],
                package_path=(packages[i] if packages else "pkg/a"),
                text=f"text of {ids[i]}",
                metadata=(metadata[i] if metadata else {}),
                vector=[float(x) for x in vectors[i]],
            ),
        )
        for i in range(n)
    ]
    write_records(conn, family, OfflineBackend(), records)
    conn.execute("ANALYZE ragstore.chunks")
    conn.execute(f"ANALYZE ragstore.{family.table}")
    conn.commit()
    return ids


def clustered(n, dim=16, seed=0, clusters=20):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(clusters, dim))
    return (centers[rng.integers(0, clusters, n)] + 0.3 * rng.normal(size=(n, dim))).astype(np.float32)


@pytest.fixture
def family(conn):
    return families.create_family(conn, "docs", OfflineBackend())
