"""How fast the test fixtures can make each test's database: clones of a migrated template per second, by 1,
2 and 4 threads at once (tests/fix_db.py clones ahead by AHEAD threads).

    python benchmarks/db_clones.py                 # 16 clones and drops per round, 2 rounds
    python benchmarks/db_clones.py --clones 32 --rounds 3

On a throwaway embedded server set up as the test fixtures set theirs (no fsync, ``STRATEGY FILE_COPY``):
a template migrated to head, then per round and thread count N clones of it and N drops. Prints the
milliseconds per clone and per drop, and each thread count's ratio to one thread in the same round. A clone
is little CPU but waits twice for the checkpointer, so the ratios depend on how loaded the machine is: run
it under the load the tests see.
"""

from __future__ import annotations

import argparse
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import psycopg
from _db import admin_dsn
from psycopg import sql
from psycopg.conninfo import make_conninfo

from ragstore import migrate


def _no_durability(admin: str) -> None:
    """The settings tests/fix_db.py gives its embedded server."""
    with psycopg.connect(admin, autocommit=True) as conn:
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(sql.SQL("ALTER SYSTEM SET {} = off").format(sql.Identifier(setting)))
        conn.execute("SELECT pg_reload_conf()")


THREADS = (1, 2, 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clones", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with admin_dsn(None) as admin:
        _no_durability(admin)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("DROP DATABASE IF EXISTS bench_tpl WITH (FORCE)")
            conn.execute("CREATE DATABASE bench_tpl ENCODING 'UTF8' TEMPLATE template0")
        migrate.upgrade(make_conninfo(admin, dbname="bench_tpl"))

        def clone(_: int) -> str:
            name = f"bench_{uuid.uuid4().hex[:12]}"
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE bench_tpl STRATEGY FILE_COPY").format(sql.Identifier(name))
                )
            return name

        def drop(name: str) -> None:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))

        for round_ in range(1, args.rounds + 1):
            one = 0.0
            for threads in THREADS:
                started = time.perf_counter()
                with ThreadPoolExecutor(threads) as pool:
                    names = list(pool.map(clone, range(args.clones)))
                cloned = time.perf_counter()
                with ThreadPoolExecutor(threads) as pool:
                    list(pool.map(drop, names))
                dropped = time.perf_counter()
                per_clone = (cloned - started) / args.clones * 1000
                one = one or per_clone
                print(
                    f"round {round_}, {threads} thread(s): {per_clone:.0f} ms per clone ({one / per_clone:.1f}x one "
                    f"thread's rate), {(dropped - cloned) / args.clones * 1000:.0f} ms per drop",
                    flush=True,
                )


if __name__ == "__main__":
    main()
