"""``ragstore search`` and ``ragstore check-recall``: parse, call one Store method, print.

Also the options of the second stage (the cross-encoder reranker and HyDE) that ``search``, ``eval``,
``context-pack`` and ``serve`` share, and the objects made of them."""

from __future__ import annotations

import contextlib
import shutil
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click

from ragstore.cli.main import CliError, app, emit_json, terminal_safe
from ragstore.common.endpoint import MAX_TIMEOUT
from ragstore.embed.external import read_vector_file
from ragstore.errors import FingerprintVectorsWarning
from ragstore.search.hyde import HYDE_MODES, Hyde
from ragstore.search.recall import RecallReport
from ragstore.search.request import MAX_K, MODES, Hit, parse_where
from ragstore.search.rerank import APIS, DEFAULT_DEPTH, HttpReranker

F = TypeVar("F", bound=Callable[..., Any])

RERANK_OPTIONS = ("reranker_url", "reranker_model", "reranker_api", "reranker_key_env", "reranker_key_file")
HYDE_OPTIONS = ("hyde_url", "hyde_model", "hyde_key_env", "hyde_key_file")


# A request's deadline in seconds: above 0, at most MAX_TIMEOUT (the endpoint refuses NaN).
TIMEOUT = click.FloatRange(0.0, MAX_TIMEOUT, min_open=True)

# Each option as (flag, help, click.option's other keywords), in the order --help lists them. A choice
# defaults to its first choice; a default other than None is shown in the help.
Table = tuple[tuple[str, str, dict[str, Any]], ...]

RERANK_TABLE: Table = (
    (
        "--reranker-url",
        "The /rerank endpoint for --rerank cross (Cohere, Jina, TEI, Infinity, vLLM).",
        {"metavar": "URL"},
    ),
    ("--reranker-model", "Model name sent to the reranker (Cohere/Jina need it).", {}),
    ("--reranker-api", "Request shape: cohere sends 'documents', tei sends 'texts'.", {"type": click.Choice(APIS)}),
    (
        "--rerank-depth",
        "First-stage hits the reranker reorders.",
        {"type": click.IntRange(1, 1000), "default": DEFAULT_DEPTH},
    ),
    ("--reranker-key-env", "Env variable holding its API key.", {"metavar": "NAME"}),
    ("--reranker-key-file", "File holding its API key.", {"type": click.Path(dir_okay=False)}),
    ("--reranker-timeout", "Seconds per reranker request, to its last byte.", {"type": TIMEOUT, "default": 30.0}),
)

HYDE_TABLE: Table = (
    ("--hyde", "Search with a chat model's hypothetical answer (HyDE).", {"is_flag": True}),
    ("--hyde-url", "OpenAI-compatible API root, e.g. .../v1.", {"metavar": "URL"}),
    ("--hyde-model", "Chat model that writes the hypothetical answer.", {}),
    (
        "--hyde-mode",
        "average: mean of query and answer vectors; replace: the answer's vector alone.",
        {"type": click.Choice(HYDE_MODES)},
    ),
    (
        "--hyde-key-env",
        "Env variable holding the chat API key (none sent when unset).",
        {"default": "OPENAI_API_KEY", "metavar": "NAME"},
    ),
    ("--hyde-key-file", "File holding that key.", {"type": click.Path(dir_okay=False)}),
    ("--hyde-timeout", "Seconds per chat request, to its last byte.", {"type": TIMEOUT, "default": 30.0}),
)


def add_options(func: F, table: Table) -> F:
    """``func`` with the click options of ``table``, listed by --help in the table's order."""
    for flag, help_text, settings in reversed(table):
        kind = settings.get("type")
        if isinstance(kind, click.Choice):
            settings = {"default": kind.choices[0], **settings}
        shown = settings.get("default") is not None and not settings.get("is_flag")
        func = click.option(flag, help=help_text, show_default=shown, **settings)(func)
    return func


def reranker_options(func: F) -> F:
    """``--reranker-url``, ``--reranker-model``, ``--reranker-api``, ``--rerank-depth``, key and timeout."""
    return add_options(func, RERANK_TABLE)


def hyde_options(func: F) -> F:
    """``--hyde`` and the chat endpoint it asks."""
    return add_options(func, HYDE_TABLE)


def closing(*clients: HttpReranker | Hyde | None) -> contextlib.ExitStack:
    """A context that closes the given clients (None skipped) when it ends."""
    stack = contextlib.ExitStack()
    for client in clients:
        if client is not None:
            stack.callback(client.close)
    return stack


def make_reranker(rerank: str | None, opts: dict[str, Any]) -> HttpReranker | None:
    """The reranker ``--rerank cross`` asked for, or None; a usage error for options that do not fit."""
    if rerank != "cross":
        given = [name for name in RERANK_OPTIONS if opts.get(name) not in (None, "cohere")]
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise click.UsageError(f"{flag} is used only with --rerank cross")
        return None
    if not opts.get("reranker_url"):
        raise click.UsageError("--rerank cross needs --reranker-url URL (a /rerank endpoint)")
    return HttpReranker(
        opts["reranker_url"],
        opts.get("reranker_model"),
        api=opts.get("reranker_api") or "cohere",
        api_key_env=opts.get("reranker_key_env"),
        api_key_file=opts.get("reranker_key_file"),
        timeout=opts.get("reranker_timeout") or 30.0,
    )


def server_reranker(opts: dict[str, Any]) -> HttpReranker | None:
    """The cross-encoder a server (``ragstore serve``, ``ragstore mcp``) offers its callers: the one at
    ``--reranker-url``, or None; a usage error for reranker options given without that URL."""
    if not opts.get("reranker_url"):
        given = [name for name in RERANK_OPTIONS if opts.get(name) not in (None, "cohere")]
        if given:
            raise click.UsageError(f"--{given[0].replace('_', '-')} is used only with --reranker-url")
    return make_reranker("cross" if opts.get("reranker_url") else None, opts)


def make_hyde(opts: dict[str, Any]) -> Hyde | None:
    """The HyDE client ``--hyde`` asked for, or None; a usage error for options that do not fit."""
    if not opts.get("hyde"):
        given = [name for name in ("hyde_url", "hyde_model", "hyde_key_file") if opts.get(name) is not None]
        if given:
            raise click.UsageError(f"--{given[0].replace('_', '-')} is used only with --hyde")
        return None
    if not opts.get("hyde_url") or not opts.get("hyde_model"):
        raise click.UsageError("--hyde needs --hyde-url (an OpenAI-compatible API root) and --hyde-model")
    return Hyde(
        opts["hyde_url"],
        opts["hyde_model"],
        mode=opts.get("hyde_mode") or "average",
        api_key_env=opts.get("hyde_key_env"),
        api_key_file=opts.get("hyde_key_file"),
        timeout=opts.get("hyde_timeout") or 30.0,
    )


def _metadata(where: str | None) -> dict[str, Any] | None:
    """The ``--where`` object, checked whole before any database call (InvalidInput naming --where)."""
    return None if where is None else parse_where(where)


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
        doc: dict[str, Any] = {"family": family, "query": query, "hits": [h.as_dict() for h in hits]}
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
