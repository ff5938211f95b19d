"""Ingest benchmark: ragstore's writer against the physical limit, measured in one run.

For each size N (default 100k; add 1M with --sizes 100000,1000000):

* physical limit: binary COPY of the same N rows (hashes and vectors precomputed, outside the clock)
  into tables built ``LIKE`` ragstore's chunk and family tables (same columns, keys, generated tsvector,
  btree/GIN indexes and foreign key; no HNSW), then the HNSW build on them with ragstore's m and
  ef_construction;
* ragstore first run: ``write_records`` (the path of ``ragstore index``: the one pass, then the write) into
  an empty offline family — validation, hashing, embedding, lookup, COPY, merge, per-batch commits and the
  HNSW build at the end, all on the clock;
* ragstore second run over the same records (all unchanged).

Prints rows/s of each and the ratios: first run / physical limit (goal >= 0.5) and re-run / first run
(goal >= 5). Uses $RAGSTORE_DSN if set, else a throwaway embedded server.

    python benchmarks/ingest.py --sizes 100000
    python benchmarks/ingest.py --sizes 100000,1000000

``--precomputed 100000:384,1000000:16`` runs the precomputed-vector cases instead (JSONL and Parquet into an
``external`` family against the same physical limit, re-runs, recall after a 1% change): see
``benchmarks/ingest_precomputed.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import time
import uuid
from pathlib import Path

import numpy as np
import psycopg
from _db import admin_dsn, scratch_database

from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend, fingerprint
from ragstore.families import HNSW_EF_CONSTRUCTION, HNSW_M, create_family
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.run import write_records

WORDS = "vector index query table chunk model store search recall token embed cosine graph layer".split()


def make_records(n: int, seed: int = 1) -> list[tuple[str, ChunkRecord]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        text = " ".join(rng.choice(WORDS) for _ in range(6)) + f" {i}"
        chunk_id = uuid.UUID(int=rng.getrandbits(128)).hex  # random ids: the costly case for a PK
        out.append((f"gen:{i}", ChunkRecord(chunk_id=chunk_id, package_path=f"pkg/{i % 100:02d}", text=text)))
    return out


def physical_limit(conn: psycopg.Connection, records: list[tuple[str, ChunkRecord]]) -> float:
    """Seconds for raw binary COPY into same-shaped tables plus the HNSW build."""
    rows = [r for _, r in records]
    vectors = fingerprint([r.text for r in rows])
    content = [hashlib.sha256(r.text.encode()).digest() for r in rows]
    record = [r.record_sha256("english") for r in rows]
    conn.execute("DROP SCHEMA IF EXISTS bench CASCADE")
    conn.execute("CREATE SCHEMA bench")
    conn.execute("CREATE TABLE bench.chunks (LIKE ragstore.chunks INCLUDING ALL)")
    conn.execute("CREATE TABLE bench.emb (LIKE ragstore.emb_bench INCLUDING DEFAULTS INCLUDING CONSTRAINTS)")
    conn.execute("ALTER TABLE bench.emb ADD PRIMARY KEY (chunk_id)")
    conn.execute(
        "ALTER TABLE bench.emb ADD FOREIGN KEY (family, chunk_id) REFERENCES bench.chunks (family, chunk_id)"
        " ON DELETE CASCADE"
    )
    conn.execute("CREATE INDEX ON bench.emb (package_path text_pattern_ops)")
    conn.commit()
    started = time.perf_counter()
    with conn.cursor() as cur:
        with cur.copy(
            # metadata and fts_config take their defaults ('{}', english); the tsvector is generated.
            "COPY bench.chunks (family, chunk_id, package_path, text, content_sha256, record_sha256)"
            " FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["text", "text", "text", "text", "bytea", "bytea"])
            for i, r in enumerate(rows):
                copy.write_row(("bench", r.chunk_id, r.package_path, r.text, content[i], record[i]))
        with cur.copy(
            "COPY bench.emb (chunk_id, package_path, embedding, model, content_sha256) FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["text", "text", "vector", "text", "bytea"])
            for i, r in enumerate(rows):
                copy.write_row((r.chunk_id, r.package_path, vectors[i], "fingerprint-v1", content[i]))
    conn.commit()
    conn.execute("SET maintenance_work_mem = '1GB'")
    conn.execute(
        f"CREATE INDEX ON bench.emb USING hnsw (embedding vector_cosine_ops)"
        f" WITH (m = {int(HNSW_M)}, ef_construction = {int(HNSW_EF_CONSTRUCTION)})"
    )
    conn.commit()
    elapsed = time.perf_counter() - started
    conn.execute("DROP SCHEMA bench CASCADE")
    conn.commit()
    return elapsed


def run_size(admin: str, n: int) -> dict[str, float]:
    records = make_records(n)
    with scratch_database(admin) as dsn, connect(dsn) as conn:
        family = create_family(conn, "bench", OfflineBackend())
        raw = physical_limit(conn, records)
        started = time.perf_counter()
        first = write_records(conn, family, OfflineBackend(), records)
        first_s = time.perf_counter() - started
        assert first.inserted == n, first
        started = time.perf_counter()
        second = write_records(conn, family, OfflineBackend(), records)
        second_s = time.perf_counter() - started
        assert second.unchanged == n and second.inserted == 0, second
    return {
        "rows": n,
        "physical_rows_per_s": n / raw,
        "first_rows_per_s": n / first_s,
        "rerun_rows_per_s": n / second_s,
        "first_vs_physical": raw / first_s,
        "rerun_vs_first": first_s / second_s,
        "physical_s": raw,
        "first_s": first_s,
        "rerun_s": second_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000", help="comma-separated row counts")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--precomputed", default=None, help="SIZE:DIM,... : the precomputed-vector cases instead")
    parser.add_argument("--rss", action="store_true", help="with --precomputed: peak RSS of a Parquet load")
    args = parser.parse_args()
    if args.precomputed:
        import sys

        import ingest_precomputed

        sys.argv = [sys.argv[0], "--cases", args.precomputed, *(["--rss"] if args.rss else [])]
        sys.argv += ["--json", str(args.json)] if args.json else []
        ingest_precomputed.main()
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    results = []
    with admin_dsn() as admin:
        for n in sizes:
            result = run_size(admin, n)
            results.append(result)
            print(
                f"{n:>9,} rows | physical limit {result['physical_rows_per_s']:>9,.0f} rows/s"
                f" ({result['physical_s']:.1f}s)"
                f" | ragstore first run {result['first_rows_per_s']:>9,.0f} rows/s ({result['first_s']:.1f}s)"
                f" = {result['first_vs_physical']:.2f}x physical"
                f" | re-run {result['rerun_rows_per_s']:>9,.0f} rows/s ({result['rerun_s']:.1f}s)"
                f" = {result['rerun_vs_first']:.1f}x first run",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
