"""Compose latency over 100k stored memory records of one agent (target: p50 under 50 ms).

Creates a scratch database on the server of ``--dsn`` (default: ``$RAGSTORE_DSN``, else the embedded
server), migrates it, appends ``--records`` records for one agent spread over the five stores (seeded
random salience, confidence and times), runs ``ANALYZE``, then times ``compose_from_db`` — every store
declared — ``--runs`` times without and with a task hint, prints p50/p95, and drops the database.

    python benchmarks/memory_compose.py [--dsn DSN] [--records 100000] [--runs 50]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from datetime import UTC, datetime, timedelta

from _db import admin_dsn, scratch_database
from psycopg.conninfo import conninfo_to_dict

from ragstore.db.connection import connect
from ragstore.memory import ALL_STORES, AgentProfile, MemoryRecord, add_records, compose_from_db

WORDS = "deploy rollback schema index vector query cache latency budget review release incident".split()


def records(n: int, seed: int = 7) -> list[MemoryRecord]:
    rng = random.Random(seed)
    start = datetime(2025, 1, 1, tzinfo=UTC)
    return [
        MemoryRecord(
            id=f"r{i:07d}",
            agent="bench",
            store=ALL_STORES[i % 5],
            at=start + timedelta(seconds=rng.randrange(0, 365 * 86_400)),
            content=" ".join(rng.choices(WORDS, k=12)) + f" #{i}",
            salience=round(rng.random(), 3),
            confidence=round(rng.random(), 3),
        )
        for i in range(n)
    ]


def timed(fn: object, runs: int) -> tuple[float, float]:
    assert callable(fn)
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(0.95 * (len(samples) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("RAGSTORE_DSN"))
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    with admin_dsn(args.dsn) as admin, scratch_database(admin) as dsn:
        with connect(dsn) as conn:
            t = time.perf_counter()
            add_records(conn, records(args.records))
            conn.commit()
            load_s = time.perf_counter() - t
            conn.execute("ANALYZE ragstore.memory")
            conn.commit()
            profile = AgentProfile(agent="bench", stores=[s.value for s in ALL_STORES])
            now = datetime(2026, 1, 1, tzinfo=UTC)
            kept = len(compose_from_db(conn, profile, now=now).all_records())
            plain = timed(lambda: compose_from_db(conn, profile, now=now), args.runs)
            hinted = timed(lambda: compose_from_db(conn, profile, now=now, task_hint="Rollback"), args.runs)
            rare = timed(lambda: compose_from_db(conn, profile, now=now, task_hint="#99999"), args.runs)
        server = conninfo_to_dict(admin).get("host", "?")
        print(f"memory compose: {args.records} records, one agent, 5 stores, server {server}")
        print(f"  load (add_records): {load_s:.1f} s; bundle: {kept} records")
        print(f"  compose, no hint:          p50 {plain[0]:.2f} ms  p95 {plain[1]:.2f} ms  (target p50 < 50 ms)")
        print(f"  compose, common hint:      p50 {hinted[0]:.2f} ms  p95 {hinted[1]:.2f} ms")
        print(f"  compose, hint in 1 record: p50 {rare[0]:.2f} ms  p95 {rare[1]:.2f} ms  (scans the hinted stores)")


if __name__ == "__main__":
    main()
