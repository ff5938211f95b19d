"""`ragstore family migrate` on the local Citus cluster: the new table is distributed and co-located like
the old one, readers keep getting answers during the migration, and the swap drops the old table."""

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from ragstore import families
from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import ModelMismatch
from ragstore.families.migrate import migrate_family
from ragstore.search.api import search
from tests.toolkit.family_migrate import HashBackend, index, vectors_for, write_jsonl

pytestmark = [pytest.mark.citus, pytest.mark.slow, pytest.mark.xdist_group("citus")]


def layout(conn: psycopg.Connection[Any], table: str) -> tuple[Any, ...]:
    """(distribution column, co-located with chunks, number of workers holding its shards)."""
    row = conn.execute(
        "SELECT column_to_column_name(p.logicalrelid, p.partkey), "
        "p.colocationid = (SELECT colocationid FROM pg_dist_partition "
        "                  WHERE logicalrelid = 'ragstore.chunks'::regclass), "
        "(SELECT count(DISTINCT nodeport) FROM citus_shards s WHERE s.table_name = p.logicalrelid) "
        "FROM pg_dist_partition p WHERE p.logicalrelid = %s::regclass",
        (f"ragstore.{table}",),
    ).fetchone()
    return tuple(row) if row else ()


def test_family_migrate_swaps_in_a_distributed_table_while_readers_get_answers(citus_dsn: str, tmp_path: Path) -> None:
    with connect(citus_dsn) as conn:
        families.create_family(conn, "docs", OfflineBackend())
        conn.commit()
        index(conn, write_jsonl(tmp_path / "c.jsonl", 40))
        old = families.get_family(conn, "docs").table
        conn.commit()
    hits_seen: list[int] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        try:
            with connect(citus_dsn) as rc:
                probe = np.ones(8, dtype=np.float32)
                while not stop.is_set():
                    # The vector is made for the family read here; should the swap to the new model land
                    # between that read and the search (which reads the family again), the search refuses
                    # the old dimension (ModelMismatch) and the reader asks once more.
                    for attempt in range(2):
                        family = families.get_family(rc, "docs")
                        vector = probe if family.dim == 8 else np.ones(family.dim, dtype=np.float32)
                        try:
                            hits_seen.append(len(search(rc, "docs", vector=vector, mode="hnsw", k=5)))
                        except ModelMismatch:
                            rc.rollback()
                            if attempt or families.get_family(rc, "docs").dim == family.dim:
                                raise
                            continue
                        rc.commit()
                        break
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=reader)

    def more_reads(n: int) -> None:
        target = len(hits_seen) + n
        while len(hits_seen) < target and thread.is_alive():
            time.sleep(0.01)

    thread.start()
    try:
        more_reads(3)  # searches before the migration, during it (below), and after the swap
        with connect(citus_dsn) as conn:
            report = migrate_family(conn, "docs", HashBackend(delay=0.005), batch_size=8)
        more_reads(3)
    finally:
        stop.set()
        thread.join()
    assert not errors, errors
    assert report.swapped and report.written == 40 and report.old_table_dropped
    assert hits_seen and set(hits_seen) == {5}, hits_seen
    with connect(citus_dsn) as conn:
        family = families.get_family(conn, "docs")
        assert (family.model, family.dim, family.state) == ("hash-a", 8, "ready")
        assert family.table != old and layout(conn, family.table) == ("chunk_id", True, 2)
        assert conn.execute("SELECT to_regclass(%s)", (f"ragstore.{old}",)).fetchone() == (None,)
        texts = dict(conn.execute("SELECT chunk_id, text FROM ragstore.chunks WHERE family = 'docs'").fetchall())
        assert len(texts) == 40
        # Every vector is the new model's, and exact search finds each chunk by its own vector.
        for chunk_id in sorted(texts)[:5]:
            vector = vectors_for("hash-a", 8, [texts[chunk_id]])[0]
            top = search(conn, "docs", vector=vector, mode="exact", k=1)
            assert top[0].chunk_id == chunk_id and top[0].score > 0.9999
