"""``ragstore search`` and ``ragstore check-recall``: parse, call one library function, print."""

from __future__ import annotations

import contextlib
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from ragstore.cli.app import CliError, app, emit_json, terminal_safe
from ragstore.cli.second_stage import closing, hyde_options, make_hyde, make_reranker, reranker_options
from ragstore.embed.external import read_vector_file
from ragstore.errors import FingerprintVectorsWarning
from ragstore.search.filters import parse_where
from ragstore.search.recall import RecallReport
from ragstore.search.request import MAX_K, MODES
from ragstore.search.types import Hit


def _metadata(where: str | None) -> dict[str, Any] | None:
    """The ``--where`` object, checked whole before any database call (InvalidInput naming --where)."""
    return None if where is None else parse_where(where)


def _hit_dict(hit: Hit) -> dict[str, Any]:
    data: dict[str, Any] = {
        "chunk_id": hit.chunk_id,
        "package_path": hit.package_path,
        "score": hit.score,
        "citation": hit.citation,
        "text": hit.text,
        "metadata": hit.metadata,
    }
    if hit.ranks:
        data["ranks"] = hit.ranks
    if hit.scores:
        data["scores"] = hit.scores
    if hit.rerank_score is not None or hit.first_rank is not None:
        data["rerank_score"] = hit.rerank_score
        data["first_rank"] = hit.first_rank
    return data


def _one_line(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(width - 1, 1)] + "…"


def format_hits(hits: list[Hit], width: int | None = None, mmr_lambda: float | None = None) -> str:
    """A readable table: rank, score, citation, then the start of the text on the next line.

    After MMR (``mmr_lambda`` given) the order is MMR's, not the score's: a header line says so, the score
    column is labelled as each hit's cosine to the query, and each row shows its rank by that cosine."""
    if not hits:
        return "no hits"
    width = width or shutil.get_terminal_size((100, 20)).columns
    lines = []
    by_cosine: dict[int, int] = {}
    if mmr_lambda is not None:
        order = sorted(range(len(hits)), key=lambda i: -hits[i].score)
        by_cosine = {i: n for n, i in enumerate(order, 1)}
        lines.append(
            f"  #    cosine  by cosine  citation   (MMR order, lambda {mmr_lambda:g}: relevance against "
            "similarity to the hits above; cosine = similarity to the query)"
        )
    for rank, hit in enumerate(hits, 1):
        if mmr_lambda is not None:
            lines.append(terminal_safe(f"{rank:>3}  {hit.score:8.4f}  {f'#{by_cosine[rank - 1]}':>9}  {hit.citation}"))
        elif hit.first_rank is not None:  # a cross-encoder's order: its score, then where the hit was before
            rerank = "    n/a " if hit.rerank_score is None else f"{hit.rerank_score:8.4f}"
            was = f"(first stage #{hit.first_rank}, {hit.score:.4f})"
            lines.append(terminal_safe(f"{rank:>3}  {rerank}  {was}  {hit.citation}"))
        else:
            lines.append(terminal_safe(f"{rank:>3}  {hit.score:8.4f}  {hit.citation}"))
        lines.append(f"     {terminal_safe(_one_line(hit.text, width - 6))}")
    return "\n".join(lines)


@click.command("search")
@click.argument("family")
@click.argument("query", required=False)
@click.option(
    "--vector-file",
    default=None,
    help="Search by this vector instead of a text: a JSON array of numbers or a .npy file "
    "(the way to query a family of the external backend).",
)
@click.option("-k", "k", type=int, default=10, show_default=True, help=f"How many hits (at most {MAX_K}).")
@click.option("--mode", type=click.Choice(MODES), default="auto", show_default=True)
@click.option("--exact", is_flag=True, help="Exact numpy scan of the whole family (same as --mode exact).")
@click.option("--package", default=None, help="Only chunks whose package_path starts with this.")
@click.option("--where", default=None, help='Metadata containment, a JSON object: --where \'{"lang": "en"}\'.')
@click.option(
    "--min-score",
    type=float,
    default=None,
    help="Drop hits below this: cosine to the query (hnsw, exact, hybrid) or the full-text score (fts).",
)
@click.option("--ef-search", type=int, default=None, help="hnsw.ef_search for this query (default 100).")
@click.option(
    "--rerank",
    type=click.Choice(["mmr", "cross"]),
    default=None,
    help="Re-rank: mmr for diversity, cross with a cross-encoder at --reranker-url.",
)
@click.option("--lambda", "mmr_lambda", type=float, default=0.5, show_default=True, help="MMR relevance weight.")
@click.option("--fetch-k", type=int, default=50, show_default=True, help="Candidates MMR chooses from.")
@click.option("--fusion", type=click.Choice(["rrf", "cc"]), default=None, help="Hybrid fusion (default: the family's).")
@click.option("--alpha", type=click.FloatRange(0, 1), default=None, help="Dense weight of --fusion cc (0..1).")
@reranker_options
@hyde_options
@click.option("--json", "as_json", is_flag=True, help="One JSON document for scripts.")
@click.option(
    "--explain",
    type=click.Choice(["plan", "analyze"]),
    is_flag=False,
    flag_value="plan",
    default=None,
    help="Print, instead of the hits, the statements the search ran with their parameters inlined (a psql "
    "script); --explain analyze adds EXPLAIN ANALYZE of each. Put it after QUERY.",
)
@click.pass_context
def search_command(
    ctx: click.Context,
    /,
    family: str,
    query: str | None,
    vector_file: str | None,
    k: int,
    mode: str,
    exact: bool,
    package: str | None,
    where: str | None,
    min_score: float | None,
    ef_search: int | None,
    rerank: str | None,
    mmr_lambda: float,
    fetch_k: int,
    fusion: str | None,
    alpha: float | None,
    as_json: bool,
    explain: str | None,
    rerank_depth: int,
    **remote: Any,
) -> None:
    """Search FAMILY for QUERY (embedded with the family's own backend); hits cite [package_path#chunk_id].

    With --vector-file FILE instead of QUERY, search by that vector (the way to query an external family)."""
    if exact and mode not in ("auto", "exact"):
        raise CliError(f"--exact contradicts --mode {mode}")
    if (query is None) == (vector_file is None):
        raise CliError("give either QUERY (a text) or --vector-file FILE, not both or neither")
    metadata = _metadata(where)
    vector = None if vector_file is None else read_vector_file(vector_file)
    reranker = make_reranker(rerank, remote)
    hyde = make_hyde(remote)
    options: dict[str, Any] = dict(
        vector=vector, k=k, mode="exact" if exact else mode, min_score=min_score, package=package,
        metadata=metadata, ef_search=ef_search, rerank=rerank, mmr_lambda=mmr_lambda, fetch_k=fetch_k,
        fusion=fusion, alpha=alpha, reranker=reranker, rerank_depth=rerank_depth, hyde=hyde,
    )  # fmt: skip
    with closing(reranker, hyde), app(ctx).store() as store, fingerprint_notes() as notes:
        if explain is not None:
            script = store.explain(family, query, analyze=explain == "analyze", **options)
        else:
            hits = store.search(family, query, **options)
    if explain is not None:
        # line by line: the script's lines stay lines, and nothing in a line reaches the terminal raw
        click.echo("\n".join(terminal_safe(line) for line in script.splitlines()))
        return
    report = hyde.last if hyde is not None else None
    if report is not None and report.note:
        click.echo(terminal_safe(f"note: {report.note}"), err=True)
    if as_json:
        doc: dict[str, Any] = {"family": family, "query": query, "hits": [_hit_dict(h) for h in hits]}
        if report is not None:
            doc["hyde"] = report.as_dict()
        if notes:
            doc["notes"] = notes  # in the document, where a script reads; stderr stays quiet
        emit_json(doc)
    else:
        for note in notes:
            click.echo(terminal_safe(f"note: {note}"), err=True)
        click.echo(format_hits(hits, mmr_lambda=mmr_lambda if rerank == "mmr" else None))


@contextlib.contextmanager
def fingerprint_notes() -> Iterator[list[str]]:
    """Collect the :class:`~ragstore.errors.FingerprintVectorsWarning` texts the block's search issues
    (every time, not once per process), into the list it yields; any other warning goes on as it was."""
    notes: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FingerprintVectorsWarning)
        yield notes
    for item in caught:
        if issubclass(item.category, FingerprintVectorsWarning):
            notes.append(str(item.message))
        else:
            warnings.warn_explicit(item.message, item.category, item.filename, item.lineno)


def format_report(report: RecallReport) -> str:
    verdict = "" if report.passed is None else ("  PASS" if report.passed else f"  FAIL (< {report.min_recall})")
    return "\n".join(
        [
            f"family {report.family}: {report.queries} queries, k={report.k}, ef_search={report.ef_search}, "
            f"{storage_label(report.storage, report.rerank_factor)}",
            f"recall@{report.k}  {report.recall:.4f}{verdict}"
            + ("  (recorded on the family: ragstore family show)" if report.recorded else ""),
            f"hnsw   mean {report.hnsw_mean_ms:8.2f} ms   p95 {report.hnsw_p95_ms:8.2f} ms",
            f"exact  mean {report.exact_mean_ms:8.2f} ms   p95 {report.exact_p95_ms:8.2f} ms"
            f"   ({report.exact_timed} queries timed)",
        ]
    )


def storage_label(storage: str, rerank_factor: int | None) -> str:
    """``vector storage``, ``halfvec storage``, ``bit storage (rerank factor 10)``."""
    return f"{storage} storage" + (f" (rerank factor {rerank_factor})" if rerank_factor is not None else "")


@click.command("check-recall")
@click.argument("family")
@click.option("-k", "k", type=int, default=10, show_default=True, help=f"Hits compared per query (at most {MAX_K}).")
@click.option("--samples", type=int, default=200, show_default=True, help="Stored vectors (+ noise) to query with.")
@click.option("--query", "queries", multiple=True, help="A query text to use instead of samples (repeatable).")
@click.option("--ef-search", type=int, default=None, help="hnsw.ef_search to measure (default 100).")
@click.option("--package", default=None, help="Filter: package_path prefix.")
@click.option("--where", default=None, help="Filter: metadata containment, a JSON object.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--min-recall", type=float, default=None, help="Exit with status 3 when recall@k is below this.")
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also sweep ef_search (--sweep) and draw recall and HNSW latency against it (needs ragstore[plot]).",
)
@click.option("--sweep", default="10,20,40,64,100,200,400", show_default=True, help="ef_search values for --plot.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def check_recall_command(
    ctx: click.Context,
    family: str,
    k: int,
    samples: int,
    queries: tuple[str, ...],
    ef_search: int | None,
    package: str | None,
    where: str | None,
    seed: int,
    min_recall: float | None,
    plot: Path | None,
    sweep: str,
    as_json: bool,
) -> None:
    """Measure FAMILY's HNSW recall@k against the exact top k, with latency of each path."""
    metadata = _metadata(where)
    ef_values = _ef_values(sweep) if plot is not None else []
    if plot is not None:
        from ragstore.evaluation.plot import require_matplotlib

        require_matplotlib()  # fail before the measurements, not after them
    # The same sample of queries for the recall check and for the sweep.
    sample: dict[str, Any] = {
        "k": k,
        "samples": samples,
        "package": package,
        "metadata": metadata,
        "queries": list(queries) or None,
        "seed": seed,
    }
    with app(ctx).store() as store:
        report = store.check_recall(family, ef_search=ef_search, min_recall=min_recall, **sample)
        curve = store.sweep_recall(family, ef_values, **sample) if plot is not None else []
    if plot is not None:
        from ragstore.evaluation.plot import plot_recall_curve

        plot_recall_curve([(r.ef_search, r.recall, r.hnsw_mean_ms) for r in curve], plot)
    if as_json:
        data = report.as_dict()
        if curve:
            data["sweep"] = [
                {"ef_search": r.ef_search, "recall": r.recall, "hnsw_mean_ms": r.hnsw_mean_ms} for r in curve
            ]
        emit_json(data)
    else:
        click.echo(format_report(report))
        for r in curve:
            click.echo(f"  ef_search {r.ef_search:>5}: recall@{k} {r.recall:.3f}, hnsw mean {r.hnsw_mean_ms:.2f} ms")
        if plot is not None:
            click.echo(f"wrote {plot}")
    if report.passed is False:
        ctx.exit(3)


def _ef_values(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(
            f"{text!r}: give comma-separated integers, e.g. 10,40,100", param_hint="--sweep"
        ) from None
    if not values or min(values) < 1:
        raise click.BadParameter("ef_search values must be positive integers", param_hint="--sweep")
    return values
