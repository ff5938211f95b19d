"""``ragstore eval FAMILY --queries q.jsonl --qrels qrels.tsv [--mode M ...]``: score search modes on a test set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ragstore.cli.main import app
from ragstore.cli.search import closing, make_reranker, reranker_options
from ragstore.evaluation.datasets import read_qrels, read_queries
from ragstore.evaluation.runner import MODES, RERANKS, ModeSpec, format_table


def _specs(modes: tuple[str, ...], rerank: str | None, weights: tuple[str, ...]) -> list[ModeSpec]:
    from ragstore.search.hybrid import parse_weights

    specs = [ModeSpec(mode, rerank) for mode in (modes or ("auto",))]
    specs += [ModeSpec("hybrid", rerank, parse_weights(w)) for w in weights]
    if rerank == "cross":  # the reranker's effect: every configuration without it, then with it
        specs = [ModeSpec(s.mode, None, s.weights) for s in specs] + specs
    return specs


@click.command("eval")
@click.argument("family")
@click.option("--queries", "queries_path", required=True, type=click.Path(dir_okay=False), help="Queries JSONL.")
@click.option("--qrels", "qrels_path", required=True, type=click.Path(dir_okay=False), help="Qrels TSV/TREC.")
@click.option(
    "--mode",
    "modes",
    multiple=True,
    type=click.Choice(MODES),
    help="Mode to evaluate; repeat for an A/B table (deltas against the first). Default: the search default.",
)
@click.option("-k", "k", type=click.IntRange(1, 1000), default=10, show_default=True, help="Cut-off of the metrics.")
@click.option(
    "--rerank",
    type=click.Choice(RERANKS),
    default=None,
    help="Re-rank every mode's hits; cross adds a row per mode with the reranker next to one without.",
)
@reranker_options
@click.option(
    "--weights",
    multiple=True,
    metavar="fts=W,vector=W",
    help="Add a hybrid run with these RRF leg weights; repeat to sweep.",
)
@click.option("--per-leg", type=click.IntRange(1, 1000), default=None, help="Hybrid top-N per leg (default 20).")
@click.option("--limit", type=click.IntRange(1), default=None, help="Evaluate only the first N queries.")
@click.option("--json", "json_path", default=None, metavar="FILE", help="Write the results as JSON (- for stdout).")
@click.option("--plot", "plot_path", default=None, metavar="FILE.png", help="Draw the metrics per mode.")
@click.pass_context
def eval_command(
    ctx: click.Context,
    /,
    family: str,
    queries_path: str,
    qrels_path: str,
    modes: tuple[str, ...],
    k: int,
    rerank: str | None,
    weights: tuple[str, ...],
    per_leg: int | None,
    limit: int | None,
    json_path: str | None,
    plot_path: str | None,
    rerank_depth: int,
    **remote: Any,
) -> None:
    """Run the queries against FAMILY in each mode and print recall, precision, MRR, nDCG, hit@k and latency.

    Example: ragstore eval docs --queries q.jsonl --qrels qrels.tsv --mode hnsw --mode fts --mode hybrid
    """
    specs = _specs(modes, rerank, weights)
    for spec in specs:
        spec.check()
    reranker = make_reranker(rerank, remote)
    queries = read_queries(queries_path)
    if limit is not None:
        queries = queries[:limit]
    qrels = read_qrels(qrels_path)
    if plot_path is not None:
        from ragstore.evaluation.plot import _pyplot

        _pyplot()  # fail before the run, not after it, when matplotlib is missing
    with closing(reranker), app(ctx).store() as store:
        result = store.eval(
            family, queries, qrels, specs, k=k, per_leg=per_leg, reranker=reranker, rerank_depth=rerank_depth
        )
    if json_path == "-":
        click.echo(json.dumps(result.as_dict(), sort_keys=True, indent=2))
    else:
        click.echo(format_table(result))
        if json_path is not None:
            Path(json_path).write_text(json.dumps(result.as_dict(), sort_keys=True, indent=2) + "\n", encoding="utf-8")
    if plot_path is not None:
        from ragstore.evaluation.plot import plot_modes

        plot_modes(result, plot_path)
