"""What `ragstore migrate` at head costs when it re-applies only the function files that changed (what it
does), against re-applying every function file and the grants on every run (the alternative).

    python benchmarks/migrate_head.py               # 20 runs of each
    python benchmarks/migrate_head.py --runs 5

Each run is the library call ``ragstore.migrate.upgrade`` on a database already at head. "Every file" empties
``ragstore.applied_files`` before each run, so the run re-applies all of ``ragstore/sql/functions/`` and
section grants of ``ragstore/sql/schema.sql``. Prints the median seconds of each and their ratio. Uses
$RAGSTORE_DSN if set, else a throwaway embedded server.
"""

from __future__ import annotations

import argparse
import statistics
import time

import psycopg
from _db import admin_dsn, scratch_database

from ragstore import migrate


def timed(dsn: str, runs: int, *, reapply: bool) -> list[float]:
    seconds = []
    for _ in range(runs):
        if reapply:
            with psycopg.connect(dsn) as conn:
                conn.execute("DELETE FROM ragstore.applied_files")
        start = time.perf_counter()
        result = migrate.upgrade(dsn)
        seconds.append(time.perf_counter() - start)
        assert bool(result.replaced) == reapply, result
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--dsn", default=None)
    args = parser.parse_args()
    with admin_dsn(args.dsn) as admin, scratch_database(admin) as dsn:
        changed = statistics.median(timed(dsn, args.runs, reapply=False))
        every = statistics.median(timed(dsn, args.runs, reapply=True))
    print(f"migrate at head, changed files only: {changed:.3f} s (median of {args.runs})")
    print(f"migrate at head, every file:         {every:.3f} s (median of {args.runs})")
    print(f"every file / changed only:           {every / changed:.2f}x")


if __name__ == "__main__":
    main()
