"""``ragstore family migrate NAME --backend B``: re-embed a family with another model and swap it in;
``ragstore family migrate NAME --storage S``: rebuild its index in another storage and swap it in.

The command parses, calls one Store method (:meth:`~ragstore.Store.migrate_family`,
``plan_family_migration``, ``abort_family_migration`` or ``migrate_storage``) and prints; it is added to
the ``family`` group as ``migrate``.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import click

from ragstore.cli.main import CliError, app, count_option, emit_json, interactive
from ragstore.embed.registry import backend_settings
from ragstore.families import BACKENDS, make_backend
from ragstore.families import migrate as family_migrate
from ragstore.families.storage import MAX_RERANK_FACTOR, STORAGES

if TYPE_CHECKING:
    from ragstore.store import Store

_progressbar: Any = click.progressbar  # used as a context manager entered by hand


@click.command("migrate")
@click.argument("name")
@click.option("--backend", "backend_name", type=click.Choice(BACKENDS), default=None, help="Target backend.")
@click.option("--model", default=None, help="Target model (required for --backend openai).")
@click.option("--base-url", default=None, help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1.")
@click.option("--dimensions", type=click.IntRange(1), default=None, help="Shorter vectors (Matryoshka).")
@click.option("--api-key-env", default=None, help="Environment variable holding the API key.")
@click.option("--dry-run", is_flag=True, help="Say what it would cost (chunks, estimated time); write nothing.")
@click.option(
    "--storage",
    type=click.Choice(STORAGES),
    default=None,
    help="Switch the index storage instead (vector, halfvec, bit): the new index is built concurrently and "
    "swapped in; nothing is re-embedded.",
)
@click.option(
    "--rerank-factor",
    type=click.IntRange(1, MAX_RERANK_FACTOR),
    default=None,
    help="With --storage bit: candidates read per hit, re-ranked exactly.",
)
@click.option("--abort", is_flag=True, help="Give up an unfinished migration and drop its new table.")
@count_option("--batch-size", 100_000, family_migrate.DEFAULT_BATCH, "Chunks embedded and committed together.")
@count_option("--sample", 10_000, family_migrate.DRY_RUN_SAMPLE, "Texts embedded to time a --dry-run.")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: on a terminal).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def family_migrate_command(
    ctx: click.Context,
    name: str,
    backend_name: str | None,
    model: str | None,
    base_url: str | None,
    dimensions: int | None,
    api_key_env: str | None,
    dry_run: bool,
    storage: str | None,
    rerank_factor: int | None,
    abort: bool,
    batch_size: int,
    sample: int,
    progress: bool | None,
    as_json: bool,
) -> None:
    """Re-embed family NAME with another backend/model/dimension, then swap it in one transaction.

    Queries keep using the old vectors until the swap. Interrupted? Rerun the same command: it resumes.
    With --storage: the same vectors, indexed as halfvec or bit (or back to vector), swapped in.
    """
    if storage is not None or rerank_factor is not None:
        _storage(ctx, name, storage, rerank_factor, backend_name is not None or dry_run or abort, as_json)
        return
    if abort:
        if backend_name or dry_run:
            raise CliError("--abort takes no --backend or --dry-run")
        with app(ctx).store() as store:
            family = store.abort_family_migration(name)
        if as_json:
            emit_json({"family": name, "aborted": True, "state": family.state})
        else:
            click.echo(f"aborted the migration of {name}; it serves {family.backend}/{family.model} as before")
        return
    if backend_name is None:
        raise CliError("say where to migrate: --backend NAME (and --model for openai)")
    options = backend_settings(base_url, dimensions, api_key_env)
    backend = make_backend(backend_name, model=model, **options)
    with app(ctx).store() as store:
        if dry_run:
            plan = store.plan_family_migration(name, backend, options=options, sample=sample)
            if as_json:
                emit_json(plan.as_dict())
            else:
                click.echo(
                    f"{plan.family}: {plan.source} -> {plan.target}\n"
                    f"chunks:    {plan.chunks} ({plan.cached} in the embedding cache, {plan.to_embed} to embed)\n"
                    f"sample:    {plan.sample} texts in {plan.sample_seconds:.2f}s\n"
                    f"estimate:  {plan.estimated_seconds:.1f}s of embedding"
                )
            return
        report = _run(store, name, backend, options, batch_size, interactive() if progress is None else progress)
    if as_json:
        emit_json(report.as_dict())
    else:
        click.echo(
            f"{report.family}: {report.source} -> {report.target}, {report.written} chunks written "
            f"({report.embedded} embedded, {report.caught_up} caught up), swapped to ragstore.{report.table} "
            f"in {report.seconds:.1f}s"
        )
        if not report.old_table_dropped:
            click.echo(
                f"note: the old table ragstore.{report.old_table} was busy and is left behind (nothing reads it); "
                f"drop it later: DROP TABLE ragstore.{report.old_table}",
                err=True,
            )


def _storage(
    ctx: click.Context, name: str, storage: str | None, factor: int | None, other: bool, as_json: bool
) -> None:
    if other:
        raise CliError("--storage takes no --backend, --dry-run or --abort (migrate the model separately)")
    with app(ctx).store() as store:
        report = store.migrate_storage(name, storage, rerank_factor=factor)
    if as_json:
        emit_json(asdict(report))
        return
    sizes = " -> ".join(_size(b) for b in (report.index_bytes_before, report.index_bytes_after))
    if report.rebuilt:
        click.echo(f"{name}: index storage {report.source} -> {report.target} (HNSW index {sizes}), swapped in")
    else:
        click.echo(f"{name}: storage {report.target} already; rerank factor recorded, no index rebuilt")


def _size(n: int | None) -> str:
    return "none" if n is None else f"{n / 2**20:.1f} MiB"


def _run(store: Store, name: str, backend: Any, options: dict[str, Any], batch_size: int, show_bar: bool) -> Any:
    bar: Any = None

    def started(total: int) -> None:
        nonlocal bar
        if show_bar:
            bar = _progressbar(length=total, label=f"migrating {name}", file=sys.stderr)
            bar.__enter__()

    def advance(n: int) -> None:
        if bar is not None:
            bar.update(n)

    try:
        return store.migrate_family(
            name, backend, options=options, batch_size=batch_size, on_total=started, progress=advance
        )
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)
