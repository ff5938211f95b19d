"""Retrieval quality of every fusion mode on several eval sets, and hybrid latency against HNSW, in one run.

    export RAGSTORE_HOME=/tmp/fusion-home            # a persistent embedded server keeps the families
    python benchmarks/evalsets/build.py /tmp/evalsets                         # the two local sets
    python benchmarks/retrieval.py --index \\
        --set manpages=../shared/datasets/manpages --set gnuinfo=/tmp/evalsets/gnuinfo --set faq=/tmp/evalsets/faq

For each set (a folder with corpus.jsonl, queries.jsonl, qrels.tsv) a MiniLM family ``<set>_minilm`` is
indexed once (``--index``), every query's hybrid candidates are fetched once at 100 per leg
(:func:`ragstore.evaluation.tune.fetch_candidates`), and every mode is fused from them in numpy with the
arithmetic of the SQL statement: the two single legs, RRF, and convex combination with each normalisation
and dense weight. The table prints nDCG@10 per set × mode, the 5-fold cross-validated tuned score
(held out) of the plain argmax over 30/50/100 per leg (how ``family tune`` chose before) and of its rule
(``--min-gain-se``, at the default depth per leg), the rule's gain over the default on the same folds, and which mode is
the default. Then latency: ``search()`` as users call it, the default
hybrid against HNSW alone, interleaved query by query on the same connection (query vectors embedded
off the clock), each query timed ``--latency-reps`` times and its median kept; the mean and p95 of those
medians, the ratio, and the 1-minute load average when the set's timing ended.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ragstore.common.stats import p95
from ragstore.db.connection import connect
from ragstore.errors import NotFound
from ragstore.evaluation.datasets import read_qrels, read_queries
from ragstore.evaluation.tune import MIN_GAIN_SE, cross_validate_scores, default_grid, fetch_candidates, score_grid
from ragstore.families import backend_for, create_family, get_family, make_backend
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from ragstore.search.api import search
from ragstore.search.fusion import DEFAULT_FUSION, FusionSettings

MODES: list[tuple[str, FusionSettings]] = [
    ("rrf", FusionSettings(fusion="rrf")),
    *[(f"cc-{n} a={a}", FusionSettings(fusion="cc", normalization=n, alpha=a)) for n in ("minmax", "zscore", "tmm")
      for a in (0.5, 0.6, 0.7, 0.8)],
]  # fmt: skip


def ensure_indexed(name: str, corpus: Path) -> None:
    with connect() as conn:
        try:
            get_family(conn, name)
        except NotFound:
            create_family(conn, name, make_backend("minilm"))
        started = time.perf_counter()
        report = index_sources(conn, name, open_sources([str(corpus)]))
    print(f"{name}: {report.summary()} (wall {time.perf_counter() - started:.1f}s)", file=sys.stderr)


def latency(family: str, texts: list[str], n: int, reps: int) -> dict[str, Any]:
    """Per query, the median of ``reps`` timed runs of search() hybrid (the default) and of hnsw, interleaved
    run by run, query vectors embedded first; the mean and p95 of those medians."""
    with connect(autocommit=True) as conn:
        fam = get_family(conn, family)
        vectors = backend_for(fam).embed(texts[:n])

        class Cached:
            def __init__(self, real: Any, table: dict[str, Any]) -> None:
                self.real, self.table = real, table

            def __getattr__(self, name: str) -> Any:
                return getattr(self.real, name)

            def embed(self, batch: list[str]) -> Any:
                return np.stack([self.table[t] for t in batch])

        cached = Cached(backend_for(fam), dict(zip(texts[:n], vectors, strict=True)))
        hy: list[float] = []
        hn: list[float] = []
        for text, vector in zip(texts[:n], vectors, strict=True):
            search(conn, family, text, k=10, backend=cached)  # warm this query's pages for both
            search(conn, family, vector=vector, k=10, mode="hnsw")
            runs: tuple[list[float], list[float]] = ([], [])
            for _ in range(reps):
                t0 = time.perf_counter()
                search(conn, family, text, k=10, backend=cached)
                runs[0].append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                search(conn, family, vector=vector, k=10, mode="hnsw")
                runs[1].append((time.perf_counter() - t0) * 1000)
            hy.append(statistics.median(runs[0]))
            hn.append(statistics.median(runs[1]))
    return {
        "hybrid_mean": statistics.fmean(hy),
        "hybrid_p95": p95(hy),
        "hnsw_mean": statistics.fmean(hn),
        "hnsw_p95": p95(hn),
        "load": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", action="append", required=True, metavar="NAME=DIR", help="an eval set (repeat)")
    parser.add_argument("--index", action="store_true", help="create and index the families first")
    parser.add_argument("--subset", type=int, default=None, help="only the first N queries of each set")
    parser.add_argument("--latency-queries", type=int, default=200, help="queries timed per set (0: skip)")
    parser.add_argument("--latency-reps", type=int, default=3, help="timed runs per query (their median counts)")
    parser.add_argument("--min-gain-se", type=float, default=MIN_GAIN_SE, help="the tuner's margin (family tune)")
    args = parser.parse_args()
    grid = default_grid()
    deep = default_grid(per_legs=(30, 50, 100))  # the grid family tune searched by argmax before its rule
    table: dict[str, dict[str, float]] = {}
    notes: dict[str, str] = {}
    for item in args.set:
        name, _, folder = item.partition("=")
        data = Path(folder)
        family = f"{name}_minilm"
        if args.index:
            ensure_indexed(family, data / "corpus.jsonl")
        queries = read_queries(data / "queries.jsonl")[: args.subset]
        qrels = read_qrels(data / "qrels.tsv")
        judged = [q for q in queries if any(g > 0 for g in qrels.get(q.query_id, {}).values())]
        started = time.perf_counter()
        with connect() as conn:
            fam = get_family(conn, family)
            cands = fetch_candidates(conn, fam, judged, depth=100)
        fetched = time.perf_counter() - started
        settings = [DEFAULT_FUSION] + [s for _, s in MODES]
        _, matrix, legs = score_grid(cands, qrels, settings, 10)
        row = {"fts": float(np.mean(legs["fts"])), "vector": float(np.mean(legs["vector"]))}
        row["default"] = float(matrix[0].mean())
        for i, (label, _) in enumerate(MODES, start=1):
            row[label] = float(matrix[i].mean())
        _, scores, _ = score_grid(cands, qrels, deep, 10)
        argmax = cross_validate_scores(scores, deep, folds=5, seed=0, min_gain_se=0.0)
        _, grid_scores, _ = score_grid(cands, qrels, grid, 10)
        tuned = cross_validate_scores(grid_scores, grid, folds=5, seed=0, min_gain_se=args.min_gain_se)
        row["tuned before: argmax, 30/50/100 per leg (held out)"] = argmax.held_out
        row[f"tuned: {args.min_gain_se:g} SE rule, {DEFAULT_FUSION.per_leg} per leg (held out)"] = tuned.held_out
        row["tuned − default (held out)"] = tuned.held_out - tuned.default_held_out
        departed = sum(not f.kept_default for f in tuned.folds)
        notes[name] = (
            f"{len(judged)} queries; candidates {fetched:.0f}s; argmax choice {deep[argmax.chosen].label}; "
            f"rule choice {grid[tuned.chosen].label} (left the default in {departed} of 5 folds)"
        )
        if args.latency_queries:
            lat = latency(family, [q.text for q in judged], args.latency_queries, args.latency_reps)
            row.update({f"ms {key}": value for key, value in lat.items() if key != "load"})
            row["load average"] = lat["load"]
            row["hybrid/hnsw"] = lat["hybrid_mean"] / lat["hnsw_mean"]
        table[name] = row
        print(f"{name}: {notes[name]}", file=sys.stderr)
    names = list(table)
    labels = list(dict.fromkeys(label for row in table.values() for label in row))
    print(f"default = {DEFAULT_FUSION.label}\n")
    print("| mode | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for label in labels:
        cells = []
        for n in names:
            v = table[n].get(label)
            fmt = ".2f" if label.startswith(("ms", "hybrid/", "load")) else "+.4f" if "−" in label else ".3f"
            cells.append("" if v is None else format(v, fmt))
        print(f"| {label} | " + " | ".join(cells) + " |")
    for n in names:
        best_leg = max(table[n]["fts"], table[n]["vector"])
        print(f"\n{n}: {notes[n]}; default − best single leg = {table[n]['default'] - best_leg:+.3f}")


if __name__ == "__main__":
    main()
