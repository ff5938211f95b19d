"""What an HNSW build holds per row in maintenance_work_mem, per storage and dimension, against the rule of
ragstore/families/build_memory.py, in one run.

    python benchmarks/build_memory.py                       # 384-d and 768-d, 4,000 rows
    python benchmarks/build_memory.py --dims 384,1536 --rows 6000
    python benchmarks/build_memory.py --build-times 30000   # build seconds by workers and memory, 384-d

For each dimension a table of ``--rows`` random vectors is built into an HNSW index (ragstore's m and
ef_construction; ef_construction does not change the memory) in each storage with maintenance_work_mem at
``--memory`` and no parallel workers; pgvector reports when the graph no longer fits ("... after N tuples"),
so one row holds memory / N bytes. The rule's estimate (value + GRAPH_BYTES) is printed beside it. Without
``--dsn`` an embedded server runs in a temporary folder. ``uptime`` is printed before and after.

``--build-times N``: instead, N clustered 384-d vectors (benchmarks/peers.py's data) are built into the
``vector`` index (m 16, ef_construction 128) with one parallel worker, with the rule's workers (each with
the rule's memory), and with the server's defaults (two workers, 1GB), interleaved (the order turned each
run), ``--runs`` times: the seconds of each build and the workers the server launched (its DEBUG1 notice).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import time

from _db import admin_dsn, scratch_database
from psycopg import sql

from ragstore.db.connection import connect
from ragstore.families import HNSW_M
from ragstore.families import build_memory as bm
from ragstore.families import storage as storages

FITS = re.compile(r"no longer fits into maintenance_work_mem after (\d+) tuples")
USING = re.compile(r"using (\d+) parallel workers")


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dims", default="384,768")
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--memory", default="2MB", help="maintenance_work_mem of the probe builds")
    parser.add_argument("--dsn")
    parser.add_argument("--build-times", type=int, default=0, metavar="ROWS")
    parser.add_argument("--runs", type=int, default=2, help="rounds of --build-times")
    args = parser.parse_args()
    if args.build_times:
        build_times(args.build_times, args.dsn, args.runs)
        return
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


def build_times(rows: int, dsn: str | None, runs: int) -> None:
    from peers import make_data

    from ragstore.families import HNSW_EF_CONSTRUCTION

    vectors = make_data(rows, 1, 384)["vectors"]
    need = bm.hnsw_need(rows, "vector", "vector", 384)
    workers = bm.parallel_workers()
    cases = [
        ("one worker", 1, bm.setting(bm.maintenance_bytes(need, workers=1))),
        ("rule", workers, bm.setting(bm.maintenance_bytes(need, workers=workers))),
        ("defaults", 2, "1GB"),
    ]
    build = sql.SQL(
        "CREATE INDEX probe_hnsw ON public.probe USING hnsw (embedding vector_cosine_ops)"
        " WITH (m = {}, ef_construction = {})"
    )
    print("before:", uptime(), flush=True)
    with admin_dsn(dsn) as admin, scratch_database(admin) as scratch, connect(scratch, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.probe (id integer, embedding vector(384))")
        with conn.cursor() as cur, cur.copy("COPY public.probe FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int4", "vector"])
            for i, vector in enumerate(vectors):
                copy.write_row((i, vector))
        conn.execute("VACUUM ANALYZE public.probe")
        notices: list[str] = []
        conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        conn.execute("SET client_min_messages = debug1")
        for run in range(1, runs + 1):
            for name, workers, memory in cases if run % 2 else cases[::-1]:
                conn.execute(sql.SQL("SET max_parallel_maintenance_workers = {}").format(sql.Literal(workers)))
                conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(memory)))
                notices.clear()
                started = time.perf_counter()
                conn.execute(build.format(sql.Literal(HNSW_M), sql.Literal(HNSW_EF_CONSTRUCTION)))
                seconds = time.perf_counter() - started
                conn.execute("DROP INDEX public.probe_hnsw")
                used = next((int(m.group(1)) for n in notices if (m := USING.search(n))), 0)
                print(
                    f"run {run}: {rows:,} rows, {name:>9} ({workers} asked, {used} launched, {memory:>9}):"
                    f" {seconds:6.2f} s",
                    flush=True,
                )
    print("after:", uptime())


if __name__ == "__main__":
    main()
