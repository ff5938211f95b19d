"""Where a small first load spends its time: ``Store.index`` of benchmarks/peers.py's rows into an ``external``
family, timed by phase, beside the physical limit of the same rows, in one run.

    python benchmarks/first_load_phases.py                 # 30k x 384
    python benchmarks/first_load_phases.py --rows 100000
    python benchmarks/first_load_phases.py --postings 3    # postings by the trigger or after the load

The rows are peers.py's (clustered 384-d vectors, metadata ``cat`` and ``grp``, ten rows per package),
given to ``Store.index`` as dicts as peers.py's ragstore worker gives them. The phases are timed around
ragstore's own functions (wrapped for this run): the pass (reading, checking, hashing, COPY and merge: the
rest of the load), ``cluster_by_package`` (CLUSTER and ANALYZE) and ``ensure_hnsw_index`` (the HNSW build,
with the memory and workers of ragstore/families/build_memory.py). The physical limit is peers.py's
(binary COPY of the same rows plus the same HNSW build). Without ``--dsn`` an embedded server runs in a
temporary folder. ``uptime`` is printed before and after.

``--workers N`` builds with N parallel workers instead of the rule's (with the rule's memory for N).

``--postings RUNS``: instead, RUNS rounds of the same first load without the HNSW build, each in a fresh
database, in turn (the order turned each round): as shipped (the insert trigger writes the postings, counts
and ledger of each COPY statement); with that trigger disabled and the same rows written after the load by
one statement over the family's chunks (:data:`SETWISE`, the trigger's statement over the whole family); and
with the family table's metadata index (GIN) dropped before the load and built after it. The seconds of each,
and a digest of the postings, counts and ledger (equal in all three).
"""

from __future__ import annotations

import argparse
import functools
import subprocess
import time
from pathlib import Path
from typing import Any

from _db import admin_dsn, scratch_database
from peers import make_data, physical_limit_of
from psycopg import sql

import ragstore
import ragstore.ingest.writer as writer
from ragstore import Store, families
from ragstore.db.connection import connect
from ragstore.db.sqlfiles import query
from ragstore.embed.external import ExternalBackend
from ragstore.families import build_memory

PHASES = ("cluster_by_package", "ensure_hnsw_index")
# The insert trigger's statement (ragstore/sql/functions/chunks_count_inserted.sql) over a whole family: its
# text read from the function file, the trigger's transition table replaced by the family's chunks.
_TRIGGER = (Path(ragstore.__file__).parent / "sql" / "functions" / "chunks_count_inserted.sql").read_text()
SETWISE = (
    _TRIGGER[_TRIGGER.index("WITH terms AS") : _TRIGGER.index("RETURN NULL;")]
    .replace("FROM new_rows AS n", "FROM (SELECT * FROM ragstore.chunks WHERE family = %(family)s) AS n")
    .rstrip()
    .rstrip(";")
)
DIGEST = """
SELECT (SELECT md5(string_agg(concat_ws(' ', lexeme, chunk_id, tf, dl), ',' ORDER BY lexeme, chunk_id))
        FROM ragstore.chunk_terms),
       (SELECT md5(string_agg(concat_ws(' ', lexeme, df), ',' ORDER BY lexeme)) FROM ragstore.chunk_term_df),
       (SELECT concat_ws(' ', sum(delta), sum(tokens)) FROM ragstore.family_chunk_deltas)
"""


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def timed(seconds: dict[str, float], name: str) -> None:
    original = getattr(writer, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - started

    setattr(writer, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=30_000)
    parser.add_argument("--dsn")
    parser.add_argument("--postings", type=int, default=0, metavar="RUNS")
    parser.add_argument("--workers", type=int, help="the build's parallel workers instead of the rule's")
    args = parser.parse_args()
    if args.workers is not None:  # the rule's memory follows (families.tables.build_settings)
        setattr(build_memory, "parallel_workers", lambda: args.workers)  # noqa: B010 - this run only
    rows = make_rows(args.rows)
    if args.postings:
        compare_postings(rows, args.dsn, args.postings)
        return
    seconds: dict[str, float] = {}
    for name in PHASES:
        timed(seconds, name)
    print("before:", uptime(), f"(build workers: {build_memory.parallel_workers()})", flush=True)
    with admin_dsn(args.dsn) as admin:
        limit = physical_limit_of(admin, make_data(args.rows, 1, 384))
        with scratch_database(admin) as dsn, Store(dsn) as store:
            backend = ExternalBackend("peers-bench", 384)
            store.create_family("bench", backend)
            started = time.perf_counter()
            store.index(iter(rows), "bench", backend=backend)
            total = time.perf_counter() - started
    rest = total - sum(seconds.values())
    print(f"physical limit {limit:.2f} s; ragstore first load {total:.2f} s = {limit / total:.2f}x the limit")
    print(f"- pass (read, check, hash, COPY, merge): {rest:.2f} s ({rest / total:.0%})")
    for name in PHASES:
        print(f"- {name}: {seconds.get(name, 0.0):.2f} s ({seconds.get(name, 0.0) / total:.0%})")
    print("after:", uptime())


def make_rows(count: int) -> list[dict[str, Any]]:
    """peers.py's rows as the dicts its ragstore worker gives ``Store.index``."""
    data = make_data(count, 1, 384)
    return [
        {
            "chunk_id": f"r{i}",
            "package_path": f"doc{i // 10}",
            "text": f"row {i} of document {i // 10}",
            "metadata": {"cat": int(data["cat"][i]), "grp": int(data["grp"][i])},
            "vector": data["vectors"][i].tolist(),
        }
        for i in range(count)
    ]


def compare_postings(rows: list[dict[str, Any]], dsn: str | None, runs: int) -> None:
    """RUNS rounds of a first load without its HNSW build, in turn: as shipped, with the postings written after
    the load, and with the family's metadata index built after the load."""
    setattr(writer, "ensure_hnsw_index", lambda conn, family: None)  # noqa: B010 - this run only
    print("before:", uptime(), flush=True)
    with admin_dsn(dsn) as admin:
        for run in range(1, runs + 1):
            for variant in VARIANTS if run % 2 else VARIANTS[::-1]:
                load, after, digest = deferred_load(admin, rows, variant)
                print(
                    f"run {run}, {variant:>20}: load {load:6.2f} s + after it {after:5.2f} s = {load + after:6.2f} s;"
                    f" postings digest {digest}",
                    flush=True,
                )
    print("after:", uptime())


VARIANTS = ("shipped", "postings after", "metadata index after")


def deferred_load(admin: str, rows: list[dict[str, Any]], variant: str) -> tuple[float, float, Any]:
    """Seconds of the load, of the work put after it, and the postings' digest, in a fresh database."""
    backend = ExternalBackend("peers-bench", 384)
    with scratch_database(admin) as scratch:
        with Store(scratch) as store:
            store.create_family("bench", backend)
        with connect(scratch, autocommit=True) as conn:
            family = families.get_family(conn, "bench")
            if variant == "postings after":
                conn.execute("ALTER TABLE ragstore.chunks DISABLE TRIGGER chunks_count_insert")
            if variant == "metadata index after":
                conn.execute(sql.SQL("DROP INDEX ragstore.{}").format(sql.Identifier(family.metadata_index)))
        with Store(scratch) as store:
            started = time.perf_counter()
            store.index(iter(rows), "bench", backend=backend)
            load = time.perf_counter() - started
        with connect(scratch) as conn:
            started = time.perf_counter()
            if variant == "postings after":
                conn.execute(SETWISE, {"family": "bench"})
            if variant == "metadata index after":
                conn.execute(sql.SQL(query("families", "create_metadata_index")).format(**family.identifiers()))
            conn.commit()
            return load, time.perf_counter() - started, conn.execute(DIGEST).fetchone()


if __name__ == "__main__":
    main()
