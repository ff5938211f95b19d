"""``ragstore family create|list|show|tune|drop``."""

from __future__ import annotations

import json
import socket
import warnings
from typing import Any

import click

from ragstore import families
from ragstore.cli.main import CliError, app, emit_json, human_size, terminal_safe
from ragstore.embed.registry import backend_settings, default_backend
from ragstore.errors import StorageRecallWarning
from ragstore.families import BACKENDS, make_backend
from ragstore.families.storage import (
    DEFAULT_RERANK_FACTOR,
    MAX_RERANK_FACTOR,
    STORAGES,
    measured_caveat,
)


@click.group("family")
def family_group() -> None:
    """Embedding families: one backend + model + dimension, each with its own table."""


@family_group.command("create")
@click.argument("name")
@click.option(
    "--backend",
    "backend_name",
    type=click.Choice(BACKENDS),
    default=None,
    help="The embedding backend. Default: minilm when the minilm extra is installed, else offline (with a note).",
)
@click.option("--model", default=None, help="Model name (required for --backend openai and --backend external).")
@click.option("--base-url", default=None, help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1.")
@click.option(
    "--dimensions",
    type=click.IntRange(min=1),
    default=None,
    help="The vectors' dimension for --backend external (required); for openai, ask the provider for "
    "shorter vectors (Matryoshka). A positive integer.",
)
@click.option("--api-key-env", default=None, help="Environment variable holding the API key.")
@click.option(
    "--fts-config",
    default="english",
    show_default=True,
    help="Full-text configuration (english, simple, ...).",
)
@click.option(
    "--storage",
    type=click.Choice(STORAGES),
    default="vector",
    show_default=True,
    help="How the HNSW index holds the vectors: vector (full precision), halfvec (half the index) or bit "
    "(binary codes, about a sixth, re-ranked exactly; measure it with check-recall: docs/guide/storage.md).",
)
@click.option(
    "--rerank-factor",
    type=click.IntRange(1, MAX_RERANK_FACTOR),
    default=None,
    help=f"For --storage bit: candidates read per hit, re-ranked by exact cosine. Default {DEFAULT_RERANK_FACTOR}.",
)
@click.option(
    "--title-prefix/--no-title-prefix",
    default=None,
    help="Embed each document chunk with its title and heading path (Title > Install > From source) as its "
    "first line. Recorded for the family: every run chunks its documents the same way. Default: off "
    "(docs/guide/documents.md).",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def family_create(
    ctx: click.Context,
    name: str,
    backend_name: str | None,
    model: str | None,
    base_url: str | None,
    dimensions: int | None,
    api_key_env: str | None,
    fts_config: str,
    storage: str,
    rerank_factor: int | None,
    title_prefix: bool | None,
    as_json: bool,
) -> None:
    """Create family NAME (its table ragstore.emb_NAME and an HNSW cosine index)."""
    families.check_name(name)
    note = None
    if backend_name is None:
        backend_name, note = default_backend()
    options = backend_settings(base_url, dimensions, api_key_env)
    backend = make_backend(backend_name, model=model, **options)  # a bad setting fails before the database
    with app(ctx).store() as store, warnings.catch_warnings():
        warnings.simplefilter("ignore", StorageRecallWarning)  # printed below as the note
        family = store.create_family(
            name,
            backend,
            options=options,
            fts_config=fts_config,
            storage=storage,
            rerank_factor=rerank_factor,
            title_prefix=title_prefix,
        )
    if note is not None:
        click.echo(f"note: {note}", err=True)
    caveat = measured_caveat(family.storage, family.model, family.dim)
    if caveat is not None:
        click.echo(f"note: {caveat}", err=True)
    if as_json:
        emit_json(family.as_dict())
    else:
        click.echo(
            f"created family {family.name}: {family.backend}/{family.model}, {family.dim}-d "
            f"{family.vector_type}, {family.storage} index, table ragstore.{family.table}"
        )


@family_group.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def family_list(ctx: click.Context, as_json: bool) -> None:
    """List the families."""
    with app(ctx).store() as store:
        found = store.families()
    if as_json:
        emit_json([f.as_dict() for f in found])
        return
    if not found:
        click.echo("no families yet: `ragstore family create NAME`")
        return
    for f in found:
        click.echo(terminal_safe(f"{f.name:<24} {f.backend}/{f.model:<28} {f.dim:>5}-d  {f.state}"))


@family_group.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def family_show(ctx: click.Context, name: str, as_json: bool) -> None:
    """Show a family: rows, dimension, model, index and size."""

    with app(ctx).store() as store:
        stats = store.family_stats(name)
        sources = store.sources(name)

    fusion = stats.family.fusion
    tuned = "fusion" in stats.family.options
    data = stats.family.as_dict() | {
        "fusion": fusion.as_dict() | {"tuned": tuned},
        "rows": stats.rows,
        "total_bytes": stats.total_bytes,
        "hnsw_index": stats.hnsw_index,
        "hnsw_bytes": stats.hnsw_bytes,
        "recall": stats.family.options.get("recall"),
        "filter_keys": list(stats.family.filter_keys),
        "filter_keys_covering": sorted(stats.family.covering),
        "sources": [row.as_dict() for row in sources],
    }
    if as_json:
        emit_json(data)
        return
    index = (
        f"{stats.hnsw_index} (hnsw {stats.family.opclass}, {stats.family.storage} storage"
        + (f", rerank factor {stats.family.rerank_factor}" if stats.family.storage == "bit" else "")
        + f", {human_size(stats.hnsw_bytes or 0)})"
        if stats.hnsw_index
        else "MISSING (an interrupted bulk load? the next `ragstore index` run builds it)"
    )
    click.echo(
        f"family:  {stats.family.name}\n"
        f"backend: {stats.family.backend}\nmodel:   {stats.family.model}\n"
        f"dim:     {stats.family.dim} ({stats.family.vector_type})\n"
        f"table:   ragstore.{stats.family.table}\nrows:    {stats.rows}\n"
        f"index:   {index}\nsize:    {human_size(stats.total_bytes)}\nstate:   {stats.family.state}\n"
        f"fusion:  {_fusion_line(fusion)} ({'tuned: ragstore family tune' if tuned else 'the default'})\n"
        f"filter keys: {_keys_line(stats.family)}\n"
        f"recall:  {_recall_line(stats.family)}"
    )
    for row in sources:
        host = "" if row.host == socket.gethostname() else f" on {row.host}"
        click.echo(
            terminal_safe(
                f"source:  {row.prefix}/ <- {row.root}{host} (last written {row.last_written:%Y-%m-%d %H:%M:%S %Z})"
            )
        )


def _recall_line(family: families.Family) -> str:
    """The last recall check-recall recorded on the family (its storage as configured then), or how to
    measure one."""
    measured = family.options.get("recall")
    if not isinstance(measured, dict) or not isinstance(measured.get("recall"), int | float):
        return f"not measured in this storage (ragstore check-recall {family.name})"
    what = "query texts" if measured.get("texts") else "sampled queries"
    filtered = ", filtered" if measured.get("filtered") else ""
    at = str(measured.get("measured_at", ""))[:16].replace("T", " ")
    return (
        f"{measured['recall']:.4f} @{measured.get('k')}, ef_search {measured.get('ef_search')}, "
        f"{measured.get('queries')} {what}{filtered} (check-recall, {at} UTC)"
    )


def _fusion_line(settings: Any) -> str:
    if settings.fusion == "rrf":
        return f"rrf, rrf_k {settings.rrf_k}, {settings.per_leg} per leg"
    return f"cc {settings.normalization}, alpha {settings.alpha:g} (dense weight), {settings.per_leg} per leg"


@family_group.command("tune")
@click.argument("name")
@click.option("--queries", "queries_path", required=True, type=click.Path(dir_okay=False), help="Queries JSONL.")
@click.option("--qrels", "qrels_path", required=True, type=click.Path(dir_okay=False), help="Qrels TSV/TREC.")
@click.option("--folds", type=click.IntRange(2, 20), default=5, show_default=True, help="Cross-validation folds.")
@click.option("-k", "k", type=click.IntRange(1, 100), default=10, show_default=True, help="nDCG cut-off.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the fold split.")
@click.option(
    "--min-gain-se",
    type=click.FloatRange(min=0.0),
    default=1.0,
    show_default=True,
    help="Leave the default only for a mean training gain above this many standard errors (0: plain argmax).",
)
@click.option(
    "--per-leg",
    "per_legs",
    type=click.IntRange(1, 1000),
    multiple=True,
    help="Also try this depth per leg (repeat; default: the default's 20 only).",
)
@click.option("--dry-run", is_flag=True, help="Report the choice without storing it.")
@click.option("--reset", is_flag=True, help="Forget the stored settings (back to the default) and exit.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def family_tune(
    ctx: click.Context,
    name: str,
    queries_path: str,
    qrels_path: str,
    folds: int,
    k: int,
    seed: int,
    min_gain_se: float,
    per_legs: tuple[int, ...],
    dry_run: bool,
    reset: bool,
    as_json: bool,
) -> None:
    """Choose NAME's hybrid fusion (kind, normalisation, alpha, per-leg depth) on labelled queries.

    Every setting is scored by nDCG@k. The rule: the setting with the best mean gain over the default
    is chosen only when that gain exceeds --min-gain-se standard errors of its per-query differences;
    otherwise the default is kept. The rule is cross-validated (k folds: chosen on the other folds, scored
    on the fold) and the held-out score reported next to the default's; then the rule's choice on all
    queries is stored on the family (used by `ragstore search`, `ragstore eval` and
    ragstore.hybrid_search()) when it is not the default and does not lose held out. Otherwise the
    family uses the default (an earlier tuning is forgotten).
    """
    from ragstore.evaluation.datasets import read_qrels, read_queries

    families.check_name(name)
    if reset:
        with app(ctx).store() as store:
            store.reset_fusion(name)
        click.echo(f"family {name}: fusion back to the default")
        return
    queries = read_queries(queries_path)
    qrels = read_qrels(qrels_path)
    with app(ctx).store() as store:
        tuned = store.tune_family(
            name,
            queries,
            qrels,
            k=k,
            folds=folds,
            seed=seed,
            min_gain_se=min_gain_se,
            per_legs=per_legs,
            dry_run=dry_run,
        )
    if as_json:
        emit_json(tuned.as_dict())
        return
    report, stored = tuned.report, tuned.stored
    click.echo(
        f"family {name}: {report.queries} queries ({report.skipped} without a relevant judgement skipped), "
        f"{len(report.grid)} settings, {report.folds}-fold cross-validation, nDCG@{k}; the default is left "
        f"only for a mean training gain above {min_gain_se:g} × its standard error\n"
        f"  full text alone    {report.fts_only:.4f}\n  vector alone       {report.vector_only:.4f}\n"
        f"  default (untuned)  {report.untuned:.4f}\n  tuned, held out    {report.held_out:.4f}"
        f" (the default on the same folds {report.default_held_out:.4f})"
    )
    for n, f in enumerate(report.per_fold, start=1):
        choice = "kept the default" if f.kept_default else f"chose {report.grid[f.chosen].label}"
        click.echo(
            f"  fold {n} ({f.queries} q.): {choice} ({_gain(report.grid[f.best], f.gain, f.gain_se)} on "
            f"training); held out {f.held_out:.4f}, default {f.default_held_out:.4f}"
        )
    evidence = f"{_gain(report.best, report.gain, report.gain_se)} on all queries"
    if report.kept_default:
        enough = ": not enough" if report.gain > 0 else ""
        click.echo(f"  chosen: the default, {_fusion_line(report.chosen)} ({evidence}{enough})")
    else:
        click.echo(f"  chosen: {_fusion_line(report.chosen)} ({evidence}; training score {report.chosen_score:.4f})")
    if dry_run:
        click.echo("not stored (--dry-run)")
    elif stored:
        click.echo("stored on the family: `ragstore search` uses it (--fusion/--alpha override)")
    elif report.kept_default:
        click.echo("the family uses the default")
    else:
        click.echo("not stored: the held-out score does not beat the default; the family uses the default")


def _gain(best: Any, gain: float, se: float) -> str:
    """The evidence the rule weighed: the best candidate's mean gain over the default ± its standard error."""
    if gain <= 0.0:
        return "no setting beats the default"
    return f"best {best.label} {gain:+.4f} ± {se:.4f}"


@family_group.group("filter-keys")
def filter_keys_group() -> None:
    """Declared metadata filter keys: a filter on one reads a btree index of its own.

    `add NAME KEY` builds the index (concurrently: the family stays in use) and records the key; `remove
    NAME KEY` forgets it and drops the index; `list NAME` shows them. Answers are the same with or without
    a key declared; a filter on it ({"KEY": v}, $eq, $in, $gt/$gte/$lt/$lte) plans through its index.
    """


@filter_keys_group.command("add")
@click.argument("name")
@click.argument("key")
@click.option(
    "--covering",
    is_flag=True,
    help="Also hold the rows' vectors, ids and metadata in the index (about the table's size; vectors up to "
    "512 dimensions): a filtered exact search reads the index alone. Again without it: back to plain.",
)
@click.pass_context
def filter_keys_add(ctx: click.Context, name: str, key: str, covering: bool) -> None:
    """Declare KEY on family NAME: build its btree index, then record it."""
    with app(ctx).store() as store:
        family = store.add_filter_key(name, key, covering=covering)
    click.echo(f"family {name}: filter keys {_keys_line(family)}")


@filter_keys_group.command("remove")
@click.argument("name")
@click.argument("key")
@click.pass_context
def filter_keys_remove(ctx: click.Context, name: str, key: str) -> None:
    """Forget KEY on family NAME and drop its index (filters on it read the GIN index again)."""
    with app(ctx).store() as store:
        family = store.remove_filter_key(name, key)
    click.echo(f"family {name}: filter keys {_keys_line(family)}")


@filter_keys_group.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.argument("name")
@click.pass_context
def filter_keys_list(ctx: click.Context, as_json: bool, name: str) -> None:
    """The keys declared on family NAME, each with its index and whether that index is valid."""
    with app(ctx).store() as store:
        found = store.filter_keys(name)
    _echo_keys(found, as_json)


def _echo_keys(found: list[Any], as_json: bool) -> None:
    if as_json:
        emit_json([k.as_dict() for k in found])
        return
    for k in found:
        state = human_size(k.bytes or 0) if k.valid else "MISSING or invalid: run `filter-keys add` again"
        kind = "covering" if k.covering else "btree"
        click.echo(terminal_safe(f"{json.dumps(k.key, ensure_ascii=False)}  {kind} {k.index} ({state})"))


def _keys_line(family: families.Family) -> str:
    """The declared filter keys of ``family`` as JSON strings, covering ones marked."""

    cover = family.covering
    keys = [json.dumps(k, ensure_ascii=False) + (" (covering)" if k in cover else "") for k in family.filter_keys]
    return terminal_safe(", ".join(keys)) if keys else "(none)"


@family_group.command("drop")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Confirm: the family's vectors and chunks are deleted.")
@click.pass_context
def family_drop(ctx: click.Context, name: str, yes: bool) -> None:
    """Delete a family: its table, its vectors and its chunks (no other family's)."""
    if not yes:
        raise CliError(f"dropping {name!r} deletes its vectors and chunks: pass --yes to confirm")
    with app(ctx).store() as store:
        store.drop_family(name)
    click.echo(f"dropped family {name}")
    click.echo(
        "note: its table's space is back on the disk; its rows' space in the tables all families share is "
        "reused by later writes, and `ragstore vacuum --full` returns it to the disk"
    )
