"""Crash safety on the cluster, as on one node (tests/reliability/test_crash.py): kill -9 of the indexer at
seeded random points, against the Citus coordinator. Nothing committed is lost, nothing is half-written
(every chunk's vector row matches it right after the kill, across the shards), a batch is whole, and a
rerun converges to exactly the tables of a clean run (content hash of the family's chunks and vectors).
Marked ``reliability`` too, as the one-node kill -9 trials are: the fast tier leaves it to the whole suite.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ragstore import families
from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from tests.reliability.helpers import chunk, write_jsonl
from tests.toolkit.citus import digest

pytestmark = [pytest.mark.citus, pytest.mark.reliability, pytest.mark.slow, pytest.mark.xdist_group("citus")]

FAMILY = "crash9"
TRIALS = 8
ROWS = 300
BATCH = 20
_FORK = multiprocessing.get_context("fork")


def _index(target: str, path: Path, batch_size: int = 500) -> None:
    with connect(target) as conn:
        index_sources(conn, FAMILY, open_sources([str(path)]), batch_size=batch_size)


def _fresh_family(target: str) -> None:
    with connect(target) as conn:
        if any(f.name == FAMILY for f in families.list_families(conn)):
            families.drop_family(conn, FAMILY)
            conn.commit()
        families.create_family(conn, FAMILY, OfflineBackend())
        conn.commit()


def _committed(target: str, version: int) -> int:
    with psycopg.connect(target) as conn:
        row = conn.execute(
            "SELECT count(*) FROM ragstore.chunks WHERE family = %s AND metadata->>'v' = %s", (FAMILY, str(version))
        ).fetchone()
    return int(row[0]) if row else 0


def _half_written(target: str) -> list[Any]:
    """Chunk ids whose vector row disagrees with the chunk (or is missing), over every shard."""
    with connect(target) as conn:
        table = families.get_family(conn, FAMILY).table
        rows = conn.execute(
            psycopg.sql.SQL(
                "SELECT c.chunk_id FROM ragstore.chunks c LEFT JOIN ragstore.{} e "
                "ON e.family = c.family AND e.chunk_id = c.chunk_id WHERE c.family = %s "
                "AND (e.chunk_id IS NULL OR e.content_sha256 <> c.content_sha256 OR e.package_path <> c.package_path)"
            ).format(psycopg.sql.Identifier(table)),
            (FAMILY,),
        ).fetchall()
    return [r[0] for r in rows]


def _digest(target: str) -> str:
    with connect(target) as conn:
        return digest(conn, FAMILY)


def test_kill9_of_the_indexer_on_the_cluster_then_rerun_converges(citus_dsn: str, tmp_path: Path) -> None:
    old = write_jsonl(tmp_path / "v0.jsonl", (chunk(i, 0) for i in range(ROWS)))
    new = write_jsonl(tmp_path / "v1.jsonl", (chunk(i, 1) for i in range(ROWS)))
    # References on the cluster itself: a clean run of v1 into an empty family, and v0 then v1.
    _fresh_family(citus_dsn)
    _index(citus_dsn, new)
    fresh_ref = _digest(citus_dsn)
    _fresh_family(citus_dsn)
    _index(citus_dsn, old)
    _index(citus_dsn, new)
    update_ref = _digest(citus_dsn)
    assert fresh_ref == update_ref  # the same rows either way: a rerun after any kill must reach them

    rng = random.Random(20261201)
    killed_with_rows = 0
    for trial in range(TRIALS):
        _fresh_family(citus_dsn)
        if trial % 2 == 1:
            _index(citus_dsn, old)
        proc = _FORK.Process(target=_index, args=(citus_dsn, new, BATCH))
        proc.start()
        deadline = time.monotonic() + 60
        while _committed(citus_dsn, 1) == 0 and proc.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.3))
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(timeout=30)
        committed = _committed(citus_dsn, 1)
        killed_with_rows += 0 < committed < ROWS
        assert _half_written(citus_dsn) == [], f"trial {trial}: half-written rows after kill -9"
        assert committed % BATCH == 0 or committed == ROWS, f"trial {trial}: a partial batch ({committed})"
        _index(citus_dsn, new)
        assert _digest(citus_dsn) == fresh_ref, f"trial {trial} did not converge"
    # The kills must have landed mid-run often enough to mean something.
    assert killed_with_rows >= TRIALS // 2, killed_with_rows
    with connect(citus_dsn) as conn:
        families.drop_family(conn, FAMILY)
        conn.commit()
