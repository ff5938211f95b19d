"""What an HNSW build holds per row in maintenance_work_mem, per storage and dimension, against the rule of
ragstore/families/build_memory.py, in one run.

    python benchmarks/build_memory.py                       # 384-d and 768-d, 4,000 rows
    python benchmarks/build_memory.py --dims 384,1536 --rows 6000

For each dimension a table of ``--rows`` random vectors is built into an HNSW index (ragstore's m and
ef_construction; ef_construction does not change the memory) in each storage with maintenance_work_mem at
``--memory`` and no parallel workers; pgvector reports when the graph no longer fits ("... after N tuples"),
so one row holds memory / N bytes. The rule's estimate (value + GRAPH_BYTES) is printed beside it. Without
``--dsn`` an embedded server runs in a temporary folder. ``uptime`` is printed before and after.
"""

from __future__ import annotations

import argparse
import re
import subprocess

from _db import admin_dsn, scratch_database
from psycopg import sql

from ragstore.db.connection import connect
from ragstore.families import HNSW_M
from ragstore.families import build_memory as bm
from ragstore.families import storage as storages

FITS = re.compile(r"no longer fits into maintenance_work_mem after (\d+) tuples")


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dims", default="384,768")
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--memory", default="2MB", help="maintenance_work_mem of the probe builds")
    parser.add_argument("--dsn")
    args = parser.parse_args()
    memory = int(args.memory.removesuffix("MB")) * 1024 * 1024
    print("before:", uptime(), flush=True)
    print(f"{'dim':>5} {'storage':8} {'tuples fit':>10} {'bytes/row':>10} {'rule':>6} {'rule/measured':>13}")
    with admin_dsn(args.dsn) as admin, scratch_database(admin) as dsn, connect(dsn, autocommit=True) as conn:
        notices: list[str] = []
        conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        conn.execute("SET max_parallel_maintenance_workers = 0")
        conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(args.memory)))
        for dim in (int(d) for d in args.dims.split(",")):
            conn.execute("DROP TABLE IF EXISTS public.probe")
            conn.execute(sql.SQL("CREATE TABLE public.probe (embedding vector({}))").format(sql.Literal(dim)))
            conn.execute(
                "INSERT INTO public.probe SELECT (SELECT array_agg(random() - 0.5) FROM generate_series(1, %s)"
                " WHERE g > 0)::vector FROM generate_series(1, %s) AS g",
                (dim, args.rows),
            )
            for storage in storages.STORAGES:
                expression = storages.index_expression(storage, "vector", dim)
                notices.clear()
                build = "CREATE INDEX probe_hnsw ON public.probe USING hnsw ({} {}) WITH (m = {}, ef_construction = 32)"
                opclass = storages.opclass(storage, "vector")
                conn.execute(sql.SQL(build).format(sql.SQL(expression), sql.SQL(opclass), sql.Literal(HNSW_M)))
                conn.execute("DROP INDEX public.probe_hnsw")
                fitted = [int(m.group(1)) for n in notices if (m := FITS.search(n))]
                if not fitted:
                    print(f"{dim:>5} {storage:8} all {args.rows} rows fit: raise --rows")
                    continue
                measured = memory / fitted[0]
                rule = bm.hnsw_need(1, storage, "vector", dim)
                print(f"{dim:>5} {storage:8} {fitted[0]:>10} {measured:>10.0f} {rule:>6} {rule / measured:>13.3f}")
    print("after:", uptime())


if __name__ == "__main__":
    main()
