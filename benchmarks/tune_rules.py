"""Selection rules for ``ragstore family tune``, compared held out on several eval sets, in one run.

    export RAGSTORE_HOME=/tmp/fusion-home            # the MiniLM families benchmarks/retrieval.py indexed
    python benchmarks/tune_rules.py --set man=/path/to/manpages --set info=/tmp/evalsets/gnuinfo \\
        --set faq=/tmp/evalsets/faq

For each set (a folder with queries.jsonl and qrels.tsv; its family ``<set>_minilm`` already indexed)
every query's hybrid candidates are fetched once at 100 per leg and the grid is scored in numpy. Then,
for each grid (the fusion settings at the default's depth only, and at 30/50/100 per leg) and each
margin ``c`` of the paired standard-error rule (0: the plain argmax), 5-fold cross-validation over
``--seeds`` fold splits:

- "against the default": held-out tuned − the default on the same folds (mean, worst split, how many
  splits lose), and how many of the 5 folds left the default (mean over splits). The bar: never below 0.
- "power": the same with a worse setting standing in as the default (RRF, cc minmax 0.8, cc tmm 0.6),
  against the best gain any fixed setting reaches on all queries (an oracle): does the rule still find a
  real gain held out?
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ragstore.db.connection import connect
from ragstore.evaluation.datasets import read_qrels, read_queries
from ragstore.evaluation.tune import cross_validate_scores, default_grid, fetch_candidates, score_grid
from ragstore.families import get_family
from ragstore.search.fusion import DEFAULT_FUSION, FusionSettings

MARGINS = (0.0, 1.0, 2.0)
GRIDS = {"50 per leg": (50,), "30/50/100 per leg": (30, 50, 100)}
STAND_INS = (
    FusionSettings(fusion="rrf"),
    FusionSettings(fusion="cc", normalization="minmax", alpha=0.8),
    FusionSettings(fusion="cc", normalization="tmm", alpha=0.6),
)


def held_out_gains(scores: np.ndarray[Any, Any], margin: float, seeds: int) -> tuple[list[float], float]:
    """Per fold split, held-out tuned − row 0 held out; and the mean number of folds that left row 0."""
    names = [FusionSettings(fusion="rrf", rrf_k=1000 + i) for i in range(scores.shape[0])]  # no default: row 0
    gains, departed = [], 0
    for seed in range(seeds):
        cv = cross_validate_scores(scores, names, folds=5, seed=seed, min_gain_se=margin)
        gains.append(cv.held_out - cv.default_held_out)
        departed += sum(not f.kept_default for f in cv.folds)
    return gains, departed / seeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", action="append", required=True, metavar="NAME=DIR", help="an eval set (repeat)")
    parser.add_argument("--seeds", type=int, default=10, help="fold splits per rule (seeds 0..N-1)")
    args = parser.parse_args()
    deep = default_grid(per_legs=(30, 50, 100))
    print("| set | grid | rule | tuned − default held out: mean / worst split (splits losing) | folds leaving it |")
    print("|---|---|---|---|---|")
    power_rows: list[str] = []
    for item in args.set:
        name, _, folder = item.partition("=")
        queries = read_queries(Path(folder) / "queries.jsonl")
        qrels = read_qrels(Path(folder) / "qrels.tsv")
        judged = [q for q in queries if any(g > 0 for g in qrels.get(q.query_id, {}).values())]
        started = time.perf_counter()
        with connect() as conn:
            cands = fetch_candidates(conn, get_family(conn, f"{name}_minilm"), judged, depth=100)
        _, matrix, _ = score_grid(cands, qrels, deep, 10)
        print(f"{name}: {len(judged)} queries, {time.perf_counter() - started:.0f}s", file=sys.stderr)
        for label, per_legs in GRIDS.items():
            rows = [deep.index(s) for s in default_grid(per_legs=per_legs)]
            for margin in MARGINS:
                gains, departed = held_out_gains(matrix[rows], margin, args.seeds)
                rule = "argmax" if margin == 0 else f"{margin:g} SE"
                losing = sum(g < -1e-12 for g in gains)
                print(
                    f"| {name} | {label} | {rule} | {np.mean(gains):+.4f} / {min(gains):+.4f} ({losing}/{len(gains)})"
                    f" | {departed:.1f} / 5 |"
                )
            for stand_in in STAND_INS:
                order = [deep.index(stand_in)] + [r for r in rows if deep[r] != stand_in]
                oracle = float(matrix[order].mean(axis=1).max() - matrix[order[0]].mean())
                cells = []
                for margin in MARGINS:
                    gains, _ = held_out_gains(matrix[order], margin, args.seeds)
                    cells.append(f"{np.mean(gains):+.4f} / {min(gains):+.4f}")
                power_rows.append(
                    f"| {name} | {label} | {stand_in.label} | {oracle:+.4f} | " + " | ".join(cells) + " |"
                )
    print(
        f"\npower (default = {DEFAULT_FUSION.label} replaced by a worse stand-in; held-out gain: mean / worst split)\n"
    )
    print(
        "| set | grid | stand-in | oracle | " + " | ".join("argmax" if m == 0 else f"{m:g} SE" for m in MARGINS) + " |"
    )
    print("|---|---|---|---|" + "---|" * len(MARGINS))
    print("\n".join(power_rows))


if __name__ == "__main__":
    main()
