"""Measure retrieval quality and latency on the manpages set: every mode, one run.

Usage (a persistent embedded server keeps the families between runs; MiniLM indexing takes minutes once):

    export RAGSTORE_HOME=/work/rs-manpages
    python benchmarks/manpages.py --index            # create + index man_offline and man_minilm if missing
    python benchmarks/manpages.py                    # full table: 1,917 queries, every mode, both families
    python benchmarks/manpages.py --subset 200       # quick run on the first 200 queries
    python benchmarks/manpages.py --weights fts=0.5,vector=1 --weights fts=0.3,vector=1   # add hybrid sweeps

Each family is evaluated by ragstore.evaluation.runner.run_eval (the library behind `ragstore eval`), so
the table is what `ragstore eval FAMILY --mode exact --mode hnsw --mode fts --mode hybrid` prints.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ragstore.db.connection import connect
from ragstore.errors import NotFound
from ragstore.evaluation.datasets import read_qrels, read_queries
from ragstore.evaluation.runner import ModeSpec, format_table, run_eval
from ragstore.families import create_family, get_family, make_backend
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from ragstore.search.hybrid import parse_weights

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "manpages"
FAMILIES = {"man_offline": "offline", "man_minilm": "minilm"}
MODES = ("exact", "hnsw", "fts", "hybrid")


def ensure_indexed(name: str, backend: str, corpus: Path) -> None:
    with connect() as conn:
        try:
            get_family(conn, name)
        except NotFound:
            create_family(conn, name, make_backend(backend))
        started = time.perf_counter()
        report = index_sources(conn, name, open_sources([str(corpus)]))
    print(f"{report.summary()} (wall {time.perf_counter() - started:.1f}s)", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA, help="folder with corpus.jsonl, queries.jsonl, qrels.tsv")
    parser.add_argument("--family", action="append", choices=sorted(FAMILIES), help="default: both")
    parser.add_argument("--mode", action="append", choices=MODES, help="default: all four")
    parser.add_argument("--weights", action="append", default=[], help="extra hybrid run, e.g. fts=0.5,vector=1")
    parser.add_argument("--subset", type=int, default=None, help="evaluate only the first N queries")
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--index", action="store_true", help="create and index the families first")
    parser.add_argument("--json", type=Path, default=None, help="write every family's results as JSON")
    args = parser.parse_args()

    queries = read_queries(args.data / "queries.jsonl")[: args.subset]
    qrels = read_qrels(args.data / "qrels.tsv")
    results = {}
    for name in args.family or list(FAMILIES):
        if args.index:
            ensure_indexed(name, FAMILIES[name], args.data / "corpus.jsonl")
        specs = [ModeSpec(mode) for mode in (args.mode or MODES)]
        specs += [ModeSpec("hybrid", None, parse_weights(w)) for w in args.weights]
        started = time.perf_counter()
        with connect() as conn:
            result = run_eval(conn, name, queries, qrels, specs, k=args.k)
        wall = time.perf_counter() - started
        print(f"\n## {name}: {len(queries)} queries, {len(specs)} modes, wall {wall:.1f}s")
        print(format_table(result))
        results[name] = {**result.as_dict(), "wall_seconds": round(wall, 1)}
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
