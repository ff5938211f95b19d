"""How long dropping a family takes: ``ragstore family drop``'s library call on a family of N chunks.

    python benchmarks/family_drop.py                 # 100,000 chunks of 60 words
    python benchmarks/family_drop.py --rows 20000

The chunks are written by one INSERT ... SELECT into ragstore.chunks (prose-like texts: 60 words drawn
from a skewed law over a 20,000-word vocabulary), so the chunk triggers write their postings, word counts
and ledger rows as an ingest would; the family table holds no vectors (its rows go with DROP TABLE, whatever
their number). Then the family is dropped as its owner would, and the seconds are printed with the rows
the drop removed. Uses $RAGSTORE_DSN if set, else a throwaway embedded server.
"""

from __future__ import annotations

import argparse
import time

from _db import admin_dsn, scratch_database

from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend
from ragstore.families import create_family, drop_family

LOAD = """
INSERT INTO ragstore.chunks (family, chunk_id, package_path, text, content_sha256, record_sha256)
SELECT 'bench', 'c' || g, 'pkg/' || (g %% 100), t.txt, sha256(convert_to(t.txt, 'UTF8')),
       sha256(convert_to('r' || g, 'UTF8'))
FROM generate_series(1, %(rows)s) AS g
CROSS JOIN LATERAL (SELECT string_agg('w' || floor(20000 * power(random(), 3))::int, ' ') AS txt
                    FROM generate_series(1, 60) AS w(i) WHERE g > 0) AS t
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dsn", default=None)
    args = parser.parse_args()
    with admin_dsn(args.dsn) as admin, scratch_database(admin) as dsn, connect(dsn) as conn:
        create_family(conn, "bench", OfflineBackend())
        started = time.perf_counter()
        conn.execute(LOAD, {"rows": args.rows})
        conn.commit()
        loaded = time.perf_counter() - started
        row = conn.execute("SELECT count(*) FROM ragstore.chunk_terms WHERE family = 'bench'").fetchone()
        postings = int(row[0]) if row else 0
        started = time.perf_counter()
        drop_family(conn, "bench")
        dropped = time.perf_counter() - started
        print(f"{args.rows} chunks, {postings} postings: loaded in {loaded:.1f} s, family dropped in {dropped:.1f} s")


if __name__ == "__main__":
    main()
