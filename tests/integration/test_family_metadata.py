"""The family table's copy of its chunks' metadata: written by the writer, migrated for old families, and
what a metadata filter reads (the family table alone, through its GIN index)."""

from __future__ import annotations

import json

import numpy as np
import psycopg
from psycopg import sql

from ragstore import families
from ragstore.embed.offline import OfflineBackend
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.run import write_records
from ragstore.search import search
from ragstore.search.request import make_filter
from ragstore.search.vector import estimate_statements


def rows(n: int, lang: dict[int, str] | None = None) -> list[tuple[str, ChunkRecord]]:
    chosen = lang or {}
    return [
        (
            f"r{i}",
            ChunkRecord(
                chunk_id=f"c{i:02d}",
                package_path=f"p{i % 2}",
                text=f"text {i}",
                metadata={"lang": chosen.get(i, "en"), "i": i},
            ),
        )
        for i in range(n)
    ]


def copies(conn: psycopg.Connection, fam: families.Family) -> dict[str, tuple[dict, dict]]:
    query = sql.SQL(
        "SELECT e.chunk_id, e.metadata, c.metadata FROM ragstore.{} AS e "
        "JOIN ragstore.chunks AS c ON c.family = e.family AND c.chunk_id = e.chunk_id"
    ).format(sql.Identifier(fam.table))
    return {r[0]: (r[1], r[2]) for r in conn.execute(query).fetchall()}


def test_the_writer_keeps_the_family_tables_metadata_equal_to_the_chunks(conn):
    fam = families.create_family(conn, "docs", OfflineBackend())
    write_records(conn, fam, OfflineBackend(), rows(6))
    got = copies(conn, fam)
    assert len(got) == 6 and all(e == c and e["lang"] == "en" for e, c in got.values())
    # A metadata-only change (same text: no re-embedding) reaches the family table too.
    report = write_records(conn, fam, OfflineBackend(), rows(6, {2: "fr", 5: "de"}))
    assert report.embedded == 0 and report.updated == 2
    got = copies(conn, fam)
    assert all(e == c for e, c in got.values())
    assert got["c02"][0]["lang"] == "fr" and got["c05"][0]["lang"] == "de"
    hits = search(conn, "docs", vector=np.ones(fam.dim, dtype=np.float32), k=10, metadata={"lang": "fr"})
    assert [h.chunk_id for h in hits] == ["c02"]


def test_a_metadata_filter_is_planned_on_the_family_table_alone(conn):
    fam = families.create_family(conn, "docs", OfflineBackend())
    (explain, params), _ = estimate_statements(fam, make_filter(None, {"lang": "fr"}))
    plan = json.dumps(conn.execute(explain, params).fetchone()[0])
    assert '"Relation Name": "chunks"' not in plan
    assert fam.table in plan
    index = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", (fam.metadata_index,)).fetchone()
    assert index is not None and "gin" in index[0] and "jsonb_path_ops" in index[0]


def _fastupdate(conn: psycopg.Connection, index: str) -> list[str]:
    row = conn.execute(
        "SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = format('ragstore.%%I', %s::text)::regclass",
        (index,),
    ).fetchone()
    assert row is not None
    return [o for o in row[0] if o.startswith("fastupdate")]


def test_the_metadata_index_keeps_no_pending_list(conn):
    # A GIN pending list is read whole by every metadata-filtered search until VACUUM merges it.
    fam = families.create_family(conn, "docs", OfflineBackend())
    assert _fastupdate(conn, fam.metadata_index) == ["fastupdate=off"]
