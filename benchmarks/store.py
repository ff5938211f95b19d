"""Store benchmark: ``Store.search()`` against the functional ``search(conn, ...)`` on as many connections.

    python benchmarks/store.py                       # 100k x 384, 400 queries, 1 and 4 threads
    python benchmarks/store.py --rows 20000 --queries 200

The data is benchmarks/query.py's (clustered vectors, nested packages, a metadata tag; loaded by binary
COPY, clustered, HNSW built). Each query runs through both paths, interleaved query by query (so both see
the same load on a shared machine):

- 1 thread: ``Store(dsn, pool_size=1).search(...)`` against ``search(conn, ...)`` on one autocommit
  connection made by ``ragstore.connect``;
- N threads: ``Store(dsn, pool_size=N)`` shared by N threads against N threads each with its own
  connection.

Unfiltered (HNSW), with a 1% package filter and with a 1% metadata filter (exact over the subset). Prints
p50/p95 of each and the Store / functional p50 ratio. Without ``--dsn`` an embedded server runs in a
temporary folder.

``--reindex ROWS`` measures ingest instead: ROWS records of ``--dim`` precomputed vectors into an
``external`` family through ``Store.index`` (dicts), and the same records as a JSONL file through
``Store.index_files`` (what ``ragstore index FILE`` runs) into a second family; each loaded, then loaded
again unchanged. Prints the seconds of each and the Store.index / JSONL ratio of the unchanged re-index.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _db import admin_dsn, scratch_database
from query import FILTERS, K, load, make_data

from ragstore import Store
from ragstore.db.connection import connect
from ragstore.search import search


def timed_pair(
    first: Callable[[np.ndarray], Any], second: Callable[[np.ndarray], Any], qs: np.ndarray
) -> tuple[list[float], list[float]]:
    a: list[float] = []
    b: list[float] = []
    for i, q in enumerate(qs):
        order = ((first, a), (second, b)) if i % 2 == 0 else ((second, b), (first, a))
        for fn, out in order:
            started = time.perf_counter()
            fn(q)
            out.append((time.perf_counter() - started) * 1000)
    return a, b


def report(label: str, store_ms: list[float], func_ms: list[float]) -> None:
    s50, f50 = float(np.percentile(store_ms, 50)), float(np.percentile(func_ms, 50))
    s95, f95 = float(np.percentile(store_ms, 95)), float(np.percentile(func_ms, 95))
    print(
        f"  {label:<34} Store p50 {s50:6.2f} ms p95 {s95:6.2f} | search(conn) p50 {f50:6.2f} ms p95 {f95:6.2f}"
        f" | Store / search(conn) p50 {s50 / f50:.2f}"
    )


def run(dsn: str, qs: np.ndarray, threads: int, options: dict[str, Any], label: str) -> None:
    with Store(dsn, pool_size=threads, min_size=threads) as store:
        conns = [connect(dsn, autocommit=True) for _ in range(threads)]
        try:
            store_ms: list[list[float]] = [[] for _ in range(threads)]
            func_ms: list[list[float]] = [[] for _ in range(threads)]

            def worker(t: int) -> None:
                conn = conns[t]

                def via_store(q: np.ndarray) -> Any:
                    return store.search("bench", vector=q, k=K, **options)

                def via_conn(q: np.ndarray) -> Any:
                    return search(conn, "bench", vector=q, k=K, **options)

                via_store(qs[0]), via_conn(qs[0])  # warm: the family and estimate caches, prepared statements
                store_ms[t], func_ms[t] = timed_pair(via_store, via_conn, qs[t::threads])

            workers = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            report(f"{label}, {threads} thread(s)", [x for t in store_ms for x in t], [x for t in func_ms for x in t])
        finally:
            for conn in conns:
                conn.close()


def reindex(dsn: str, rows: int, dim: int, seed: int) -> None:
    from ragstore.embed.external import ExternalBackend

    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(rows, dim)).astype(np.float32)
    records = [
        {
            "chunk_id": f"r{i}",
            "package_path": f"doc{i // 10}",
            "text": f"row {i} of document {i // 10}",
            "metadata": {"cat": i % 100, "grp": i % 10},
            "vector": vectors[i].tolist(),
        }
        for i in range(rows)
    ]
    backend = ExternalBackend("reindex-bench", dim)
    print(f"\n== re-index: {rows:,} records x {dim}-d, external vectors ==")
    with Store(dsn, pool_size=2) as store, tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "records.jsonl"
        with path.open("w", encoding="utf-8") as out:
            for record in records:
                out.write(json.dumps(record) + "\n")
        seconds: dict[str, list[float]] = {"Store.index": [], "JSONL (index_files)": []}
        for family, label in (("by_records", "Store.index"), ("by_file", "JSONL (index_files)")):
            store.create_family(family, backend)
            for _ in range(2):
                started = time.perf_counter()
                if family == "by_records":
                    report = store.index(records, family, backend=backend)
                else:
                    report = store.index_files([path], family, backend=backend)
                seconds[label].append(time.perf_counter() - started)
            assert report.unchanged == rows, report.summary()
            first, again = seconds[label]
            print(f"  {label:<22} first load {first:7.1f} s   unchanged re-index {again:6.2f} s")
        ratio = seconds["Store.index"][1] / seconds["JSONL (index_files)"][1]
        print(f"  unchanged re-index, Store.index / JSONL: {ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", help="an admin DSN where databases can be created (default: embedded server)")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--threads", default="1,4", help="thread counts, e.g. 1,4,8")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reindex", type=int, metavar="ROWS", help="measure an unchanged re-index instead")
    args = parser.parse_args()
    with admin_dsn(args.dsn) as admin, scratch_database(admin) as dsn:
        if args.reindex:
            reindex(dsn, args.reindex, args.dim, args.seed)
            return
        print(f"\n== Store.search() vs search(conn): {args.rows:,} rows x {args.dim}-d, {args.queries} queries ==")
        data, qs = make_data(args.rows, args.dim, args.queries, args.seed)
        load(dsn, data)
        for threads in (int(t) for t in args.threads.split(",")):
            run(dsn, qs, threads, {}, "unfiltered (HNSW)")
            run(dsn, qs, threads, {"package": FILTERS["1%"]}, "1% package filter")
            run(dsn, qs, threads, {"metadata": {"tag": "t0"}}, "1% metadata filter")


if __name__ == "__main__":
    main()
