"""Index storage benchmark: index size, build time, recall@10 and p50/p95 of vector, halfvec and bit, one run.

    python benchmarks/storage.py                          # 100k x 384
    python benchmarks/storage.py --rows 20000 --queries 100   # a quick run
    python benchmarks/storage.py --rerank-factors 4,10,40

Data: benchmarks/query.py's clustered vectors (100 Gaussian clusters), loaded once by binary COPY; the
family then switches storage with ``family migrate --storage`` (:func:`ragstore.families.storage_migrate.
migrate_storage`: the index built concurrently beside the serving one, then swapped), so every storage
indexes the same rows. Searches go through ``ragstore.search`` (mode hnsw, the default ef_search); truth is
numpy cosine over the whole matrix. Without ``--dsn`` an embedded server runs in a temporary folder.
Every figure is from one run on one machine: compare the ratios, not the absolute milliseconds.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _db import admin_dsn, scratch_database
from query import load, make_data, truth

from ragstore.db.connection import connect
from ragstore.families.storage_migrate import migrate_storage
from ragstore.search import search


def measure(dsn: str, qs: np.ndarray, want: list[list[int]], label: str, seconds: float, size: int | None) -> None:
    with connect(dsn) as conn:
        recalls, times = [], []
        for q, truth_ids in zip(qs, want, strict=True):
            started = time.perf_counter()
            hits = search(conn, "bench", vector=q, k=10, mode="hnsw")
            times.append(time.perf_counter() - started)
            found = {int(h.chunk_id[1:]) for h in hits}
            recalls.append(len(found & set(truth_ids)) / 10)
    ms = np.array(times) * 1000
    print(
        f"  {label:<16} index {(size or 0) / 2**20:7.1f} MiB  build {seconds:6.1f} s  recall@10 {np.mean(recalls):.3f}"
        f"  p50 {np.percentile(ms, 50):.2f} ms  p95 {np.percentile(ms, 95):.2f} ms",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rerank-factors", default="4,10,40")
    parser.add_argument("--dsn", default=None)
    args = parser.parse_args()
    data, qs = make_data(args.rows, args.dim, args.queries, seed=1)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    want = truth(data, qs)
    print(f"{args.rows:,} x {args.dim} clustered, {args.queries} queries, k 10")
    with admin_dsn(args.dsn) as admin, scratch_database(admin) as dsn:
        load(dsn, data)
        plan: list[tuple[str, int | None]] = [("vector", None), ("halfvec", None)]
        plan += [("bit", int(f)) for f in args.rerank_factors.split(",")]
        for storage, factor in plan:
            with connect(dsn) as conn:
                started = time.perf_counter()
                report = migrate_storage(conn, "bench", storage, rerank_factor=factor)
                seconds = time.perf_counter() - started if report.rebuilt else 0.0
            label = storage if factor is None else f"bit x{factor}"
            measure(dsn, qs, want, label, seconds, report.index_bytes_after)


if __name__ == "__main__":
    main()
