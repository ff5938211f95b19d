"""Index storage benchmark: vector, halfvec and bit side by side on the same rows, in one run.

    python benchmarks/storage.py                                  # 100k x 384 clustered, 18.7k MiniLM passages
    python benchmarks/storage.py --cases synthetic:30000:768,synthetic:15000:1536
    python benchmarks/storage.py --cases synthetic:20000:384 --queries 100   # a quick run

For each case, the rows are loaded once (benchmarks/query.py's binary COPY and clustering by package), then
the three HNSW indexes are built on the same table one after another, each by a fresh connection
(``CREATE INDEX`` with ragstore's m, ef_construction and build memory, as a first load builds it):
build time, the building backend's peak resident memory (``VmHWM`` of its process, shared buffers it
touched included) and the index size on disk. The three indexes stay side by side, so every storage
answers the same queries, interleaved query by query (each sees the same load of a shared machine):
``ragstore.search.api.run_vector``, the path of ``ragstore search``, with the family as each storage
records it (the planner picks the index whose expression the search orders by), the default ef_search;
``bit`` at each ``--rerank-factors``. recall@10 is against numpy's exact top 10; ``check-recall`` is
``ragstore.search.recall.check_recall`` (200 sampled stored vectors plus noise) with the family's
options set to that storage.

Data: ``synthetic``: benchmarks/query.py's clustered Gaussian vectors (100 clusters), normalised, queries
fresh points of the same clusters. ``minilm``: all-MiniLM-L6-v2 embeddings of the passages of this
machine's documentation (benchmarks/_minilm_vectors.py: the eval sets' sources, cached after the first
embedding), queries the eval sets' own queries (info headings, FAQ questions). Without ``--dsn`` an
embedded server runs in a temporary folder. Every figure is from one run on one machine: compare the
ratios, not the absolute milliseconds.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from _db import admin_dsn, scratch_database
from psycopg import sql
from psycopg.types.json import Jsonb
from query import FILTERS, interleaved, load, make_data, package_of, tag_of, truth

from ragstore import families
from ragstore.db.connection import connect
from ragstore.families import storage as storages
from ragstore.families import tables
from ragstore.search import vector as vec
from ragstore.search.api import run_vector
from ragstore.search.recall import check_recall
from ragstore.search.request import DEFAULT_EF_SEARCH, make_filter

K = 10


def build(dsn: str, family: families.Family, storage: str) -> tuple[float, int, int]:
    """Build ``family``'s HNSW index in ``storage`` beside the others; (seconds, bytes, peak RSS bytes)."""
    target = replace(family, options={**family.options, "storage": storage})
    name = f"{family.table}_hnsw_{storage}"
    ids = {**target.index_identifiers(), "hnsw_index": sql.Identifier(name)}
    with connect(dsn, autocommit=True) as conn:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
        tables.size_build(conn, target, local=False)  # what ensure_hnsw_index sets for a first load
        started = time.perf_counter()
        conn.execute(sql.SQL(query_text()).format(**ids))
        seconds = time.perf_counter() - started
        peak = peak_rss(pid)
        size = conn.execute("SELECT pg_relation_size(%s::regclass)", (f"ragstore.{name}",)).fetchone()[0]  # type: ignore[index]
        conn.execute(sql.SQL("ANALYZE ragstore.{}").format(sql.Identifier(family.table)))
    return seconds, int(size), peak


def query_text() -> str:
    from ragstore.db.sqlfiles import query

    return query("families", "create_hnsw_index")


def peak_rss(pid: int) -> int:
    """``VmHWM`` of process ``pid`` in bytes (0 when /proc cannot say: a server on another machine)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def configs(family: families.Family, factors: list[int]) -> list[tuple[str, families.Family]]:
    out = [("vector", replace(family, options={})), ("halfvec", replace(family, options={"storage": "halfvec"}))]
    for f in factors:
        default = " (default)" if f == storages.DEFAULT_RERANK_FACTOR else ""
        out.append((f"bit x{f}{default}", replace(family, options={"storage": "bit", "rerank_factor": f})))
    return out


def bench_case(
    dsn: str, kind: str, data: np.ndarray, qs: np.ndarray, factors: list[int], samples: int, filters: bool
) -> None:
    n, dim = data.shape
    print(f"\n== {kind}: {n:,} x {dim}, {len(qs)} queries, k {K}, ef_search {DEFAULT_EF_SEARCH} ==", flush=True)
    family = load(dsn, data, build_index=False, meta_of=meta_of)
    built: dict[str, tuple[float, int, int]] = {}
    for storage in storages.STORAGES:
        built[storage] = build(dsn, family, storage)
        seconds, size, peak = built[storage]
        print(
            f"  built {storage:<8} {seconds:7.1f} s  {size / 2**20:8.1f} MiB  peak RSS {peak / 2**20:7.0f} MiB"
            f"  (load {os.getloadavg()[0]:.1f})",
            flush=True,
        )
    want = truth(data, qs)
    flt = make_filter(None, None)
    with connect(dsn, autocommit=True) as conn:
        plan = configs(family, factors)

        def searcher(fam: families.Family):  # type: ignore[no-untyped-def]
            return lambda q: [h.chunk_id for h in run_vector(conn, fam, q, k=K, flt=flt)]

        load_before = os.getloadavg()[0]
        results = interleaved([searcher(fam) for _, fam in plan], qs)
        load_after = os.getloadavg()[0]
        recalls_checked = []
        for _, fam in plan:
            conn.execute(
                "UPDATE ragstore.families SET options = %s WHERE name = 'bench'", (Jsonb(fam.options),)
            )  # check_recall reads the family as stored
            recalls_checked.append(check_recall(conn, "bench", k=K, samples=samples, exact_timings=0).recall)
    vector_p50 = float(np.percentile(results[0][1], 50))
    vector_size = built["vector"][1]
    print(f"  searches interleaved, load average {load_before:.1f} -> {load_after:.1f}")
    print(
        f"  {'storage':<18} {'index':>9} {'ratio':>6} {'build':>8} {'peak RSS':>9} {'recall@10':>9}"
        f" {'check-recall':>12} {'p50':>8} {'p95':>8} {'p50/vec':>7}"
    )
    for (label, fam), (found, times), checked in zip(plan, results, recalls_checked, strict=True):
        seconds, size, peak = built[fam.storage]
        rec = np.mean([len(set(f) & {f"c{i:07d}" for i in w}) / K for f, w in zip(found, want, strict=True)])
        p50, p95 = np.percentile(times, 50), np.percentile(times, 95)
        print(
            f"  {label:<18} {size / 2**20:6.1f} MiB {size / vector_size:5.2f}x {seconds:6.1f} s"
            f" {peak / 2**20:5.0f} MiB {rec:9.3f} {checked:12.3f} {p50:5.2f} ms {p95:5.2f} ms {p50 / vector_p50:6.2f}x",
            flush=True,
        )
    print(f"  bytes per row: heap {heap_bytes(dsn, family) / n:,.0f} B/row;", end="")
    print("".join(f" {s} {built[s][1] / n:,.0f} B/row" for s in storages.STORAGES))
    if filters:
        bench_filters(dsn, family, data, qs)


def meta_of(i: int) -> dict[str, object]:
    """Row i's metadata: query.py's 1% tag, ``d`` = i % 10 (a 10% filter) and ``h`` = i % 2 (50%)."""
    return {"tag": tag_of(i), "d": i % 10, "h": i % 2}


# The filters of the filtered table: (label, package prefix, metadata, the rows it keeps).
FILTER_CASES: list[tuple[str, str | None, dict[str, object] | None, object]] = [
    ("package 1%", FILTERS["1%"], None, lambda i: package_of(i).startswith(FILTERS["1%"])),
    ("package 10%", FILTERS["10%"], None, lambda i: package_of(i).startswith(FILTERS["10%"])),
    ("metadata 10%", None, {"d": 3}, lambda i: i % 10 == 3),
    ("metadata 50%", None, {"h": 1}, lambda i: i % 2 == 1),
]


def bench_filters(dsn: str, family: families.Family, data: np.ndarray, qs: np.ndarray) -> None:
    """Unfiltered and filtered searches of each storage (bit at its default factor), interleaved query by
    query: the plan search() chooses, recall@10 against the filtered exact top 10, the fewest hits, p50/p95
    and the p50 against the same storage unfiltered."""
    n = len(data)
    cases = [("unfiltered", None, None, None), *FILTER_CASES]
    masks = [None if keep is None else np.array([keep(i) for i in range(n)]) for *_, keep in cases]  # type: ignore[operator]
    truths = [truth(data, qs, mask) for mask in masks]
    plan = configs(family, [storages.DEFAULT_RERANK_FACTOR])
    with connect(dsn, autocommit=True) as conn:
        fns, labels = [], []
        for name, fam in plan:
            for label, package, metadata, _ in cases:
                flt = make_filter(package, metadata)
                fns.append(lambda q, fam=fam, flt=flt: [h.chunk_id for h in run_vector(conn, fam, q, k=K, flt=flt)])
                labels.append((name, label, vec.plan_for(conn, fam, flt)))
        load_before = os.getloadavg()[0]
        results = interleaved(fns, qs)
    after = os.getloadavg()[0]
    print(f"  filtered searches, {len(qs)} queries interleaved, load average {load_before:.1f} -> {after:.1f}")
    print(
        f"  {'storage':<18} {'filter':<13} {'plan':<15} {'recall@10':>9} {'fewest':>6} {'p50':>8} {'p95':>8}"
        f" {'/unfilt.':>8}"
    )
    base = 0.0
    for j, ((name, label, chosen), (found, times)) in enumerate(zip(labels, results, strict=True)):
        want = truths[j % len(cases)]
        rec = np.mean([len(set(f) & {f"c{i:07d}" for i in w}) / K for f, w in zip(found, want, strict=True)])
        p50, p95 = float(np.percentile(times, 50)), float(np.percentile(times, 95))
        base = p50 if j % len(cases) == 0 else base
        print(
            f"  {name:<18} {label:<13} {chosen:<15} {rec:9.3f} {min(len(f) for f in found):6d}"
            f" {p50:5.2f} ms {p95:5.2f} ms {p50 / base:7.2f}x",
            flush=True,
        )


def heap_bytes(dsn: str, family: families.Family) -> int:
    with connect(dsn) as conn:
        row = conn.execute("SELECT pg_table_size(%s::regclass)", (f"ragstore.{family.table}",)).fetchone()
    return int(row[0]) if row else 0


def synthetic(n: int, dim: int, queries: int) -> tuple[np.ndarray, np.ndarray]:
    data, qs = make_data(n, dim, queries, seed=1)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    return data, qs


def minilm(n: int, queries: int) -> tuple[np.ndarray, np.ndarray]:
    from _minilm_vectors import minilm_data

    data, qs = minilm_data(n)
    step = max(1, len(qs) // queries)
    return data, qs[::step][:queries]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="synthetic:100000:384,minilm:20000:384", help="kind:rows:dim, ...")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--samples", type=int, default=200, help="check-recall's sampled queries")
    parser.add_argument("--rerank-factors", default="4,10,20,40")
    parser.add_argument("--filters", action="store_true", help="also the filtered table (synthetic cases)")
    parser.add_argument("--dsn", default=None)
    args = parser.parse_args()
    factors = [int(f) for f in args.rerank_factors.split(",")]
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    with admin_dsn(args.dsn) as admin:
        for case in args.cases.split(","):
            kind, rows, dim = case.split(":")
            if kind == "minilm":
                data, qs = minilm(int(rows), args.queries)
            else:
                data, qs = synthetic(int(rows), int(dim), args.queries)
            with scratch_database(admin) as dsn:
                bench_case(dsn, kind, data, qs, factors, args.samples, args.filters and kind == "synthetic")
            print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), flush=True)


if __name__ == "__main__":
    main()
