"""Scale-out benchmark: one node against a local Citus cluster of 2 workers (4 and 8 shards), same rows.

For each setup: ragstore's ingest (``index_sources`` of the same synthetic JSONL, HNSW built) in rows/s;
then ``--queries`` random query vectors searched through HNSW (k = 10) unfiltered and under a 10% and a 1%
package filter: p50/p95 latency and recall@10 against the exact top 10 of the same setup. ``--dim 16``
(the default) indexes texts into an offline 16-d family; any other ``--dim`` indexes precomputed vectors
(100 random clusters, a ``vector`` on every line) into an ``external`` family of that dimension. Prints a
table, the cluster/single ratios and the load average before and after. Needs Citus built
(scripts/build_citus.sh); starts and stops its own servers in a temporary folder.

    python benchmarks/cluster.py --rows 20000 --queries 100
    python benchmarks/cluster.py --rows 20000 --dim 384 --queries 50
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import psycopg
from psycopg.conninfo import make_conninfo

from ragstore import families, migrate
from ragstore.db.cluster import LocalCluster, citus_available
from ragstore.db.connection import connect
from ragstore.db.server import EmbeddedServer
from ragstore.embed.base import Backend
from ragstore.embed.external import ExternalBackend
from ragstore.embed.offline import OfflineBackend
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from ragstore.search.api import search

FILTERS = (("none", None), ("10%", "ten/"), ("1%", "one/"))


def corpus(path: Path, rows: int, dim: int) -> Path:
    """rows chunks: 1% under package one/, 10% under ten/, the rest under rest/; with a vector each (100
    random clusters) unless dim is 16 (the offline family embeds the texts)."""
    rng = np.random.default_rng(0)
    centers = rng.standard_normal((100, dim)).astype(np.float32)
    with path.open("w", encoding="utf-8") as out:
        for i in range(rows):
            package = "one/p" if i % 100 == 0 else ("ten/p" if i % 10 == 1 else "rest/p")
            text = f"row {i} {i * 7919 % 104729}"
            record: dict[str, object] = {"chunk_id": f"s{i:07d}", "package_path": f"{package}{i % 7}", "text": text}
            if dim != 16:
                vector = centers[rng.integers(100)] + 0.3 * rng.standard_normal(dim).astype(np.float32)
                record["vector"] = [round(float(x), 5) for x in vector]
            out.write(json.dumps(record) + "\n")
    return path


def query_vectors(n: int, dim: int, random: bool) -> np.ndarray:
    """Random vectors (16-d), or, for precomputed vectors, points drawn like the rows: a cluster centre of
    the corpus plus noise (``--random-queries`` keeps plain random vectors, far from every cluster)."""
    rng = np.random.default_rng(1)
    if dim == 16 or random:
        return rng.standard_normal((n, dim)).astype(np.float32)
    centers = np.random.default_rng(0).standard_normal((100, dim)).astype(np.float32)
    picks = rng.integers(100, size=n)
    return (centers[picks] + 0.3 * rng.standard_normal((n, dim))).astype(np.float32)


def backend_for(dim: int) -> Backend:
    return OfflineBackend() if dim == 16 else ExternalBackend("bench", dim)


def measure(dsn: str, source: Path, rows: int, queries: int, dim: int, random: bool) -> dict[str, float]:
    result: dict[str, float] = {}
    with connect(dsn) as conn:
        families.create_family(conn, "bench", backend_for(dim), options=None if dim == 16 else {"dimensions": dim})
        conn.commit()
        started = time.perf_counter()
        index_sources(conn, "bench", open_sources([str(source)]))
        result["ingest_rows_s"] = rows / (time.perf_counter() - started)
        vectors = query_vectors(queries, dim, random)
        for label, package in FILTERS:
            latencies, recalls = [], []
            for q in vectors:
                truth = {h.chunk_id for h in search(conn, "bench", vector=q, mode="exact", k=10, package=package)}
                started = time.perf_counter()
                hits = search(conn, "bench", vector=q, mode="hnsw", k=10, package=package)
                latencies.append((time.perf_counter() - started) * 1000)
                recalls.append(len({h.chunk_id for h in hits} & truth) / max(len(truth), 1))
            result[f"p50_{label}"] = float(np.percentile(latencies, 50))
            result[f"p95_{label}"] = float(np.percentile(latencies, 95))
            result[f"recall_{label}"] = float(np.mean(recalls))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--dim", type=int, default=16, help="16: offline family on texts; else precomputed vectors")
    parser.add_argument("--shards", default="4,8", help="shard counts to measure on the cluster")
    parser.add_argument("--random-queries", action="store_true", help="precomputed vectors: random queries")
    args = parser.parse_args()
    load_before = os.getloadavg()
    if not citus_available():
        raise SystemExit("Citus is not built into the embedded PostgreSQL: run scripts/build_citus.sh")
    home = Path(tempfile.mkdtemp(prefix="ragstore-cluster-bench-"))
    source = corpus(home / "rows.jsonl", args.rows, args.dim)
    results: dict[str, dict[str, float]] = {}
    case = (source, args.rows, args.queries, args.dim, args.random_queries)

    single = EmbeddedServer(home / "single")
    dsn = single.ensure_running()
    try:
        migrate.upgrade(dsn)
        results["single node"] = measure(dsn, *case)
    finally:
        single.stop()

    cluster = LocalCluster(home)
    coordinator = cluster.start(2)
    try:
        for shards in [int(n) for n in args.shards.split(",")]:
            # The shard count is fixed when chunks is distributed: a fresh schema per setting.
            with psycopg.connect(coordinator, autocommit=True) as conn:
                conn.execute("DROP SCHEMA IF EXISTS ragstore CASCADE")
            dsn = make_conninfo(coordinator, options=f"-c citus.shard_count={shards}")
            migrate.upgrade(dsn)
            results[f"citus 2 workers, {shards} shards"] = measure(dsn, *case)
    finally:
        cluster.stop()

    columns = ["ingest_rows_s"] + [f"{m}_{label}" for label, _ in FILTERS for m in ("p50", "p95", "recall")]
    kind = "offline 16-d (texts)" if args.dim == 16 else f"external {args.dim}-d (precomputed vectors)"
    if args.dim != 16:
        kind += ", random queries" if args.random_queries else ", queries drawn like the rows"
    print(f"rows={args.rows} queries={args.queries} k=10 {kind}; latency in ms")
    load = " ".join(f"{x:.2f}" for x in load_before) + " before, " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average (1/5/15 min): {load} after")
    print("setup".ljust(30) + "".join(c.rjust(14) for c in columns))
    for name, row in results.items():
        print(name.ljust(30) + "".join(f"{row[c]:14.3f}" for c in columns))
    base = results["single node"]
    for name, row in results.items():
        if name != "single node":
            print(
                f"{name} / single: ingest x{row['ingest_rows_s'] / base['ingest_rows_s']:.2f}, "
                f"p50 unfiltered x{row['p50_none'] / base['p50_none']:.2f}"
            )


if __name__ == "__main__":
    main()
