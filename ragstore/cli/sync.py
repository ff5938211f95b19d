"""``ragstore sync add|alter|list|show|remove|run|status``: families that follow tables of the same database."""

from __future__ import annotations

import signal
from typing import Any

import click

from ragstore.cli.main import app, emit_json, terminal_safe


@click.group("sync")
def sync_group() -> None:
    """Families that follow tables of the same database: triggers queue changed rows, `sync run` writes them."""


@sync_group.command("add")
@click.argument("family")
@click.option("--table", required=True, help="The table to follow, SCHEMA.TABLE.")
@click.option("--id", "id_column", required=True, help="The column that identifies a row (its primary key).")
@click.option("--text", "text_columns", multiple=True, required=True, help="A column of the text (repeat; joined).")
@click.option("--metadata", "metadata_columns", multiple=True, help="A column stored as metadata (repeat).")
@click.option("--package", default=None, help="A column whose value is the package_path (default: <table>/<id>).")
@click.option("--where", "predicate", default=None, help="An SQL expression over the row: follow only those rows.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def sync_add(
    ctx: click.Context,
    family: str,
    table: str,
    id_column: str,
    text_columns: tuple[str, ...],
    metadata_columns: tuple[str, ...],
    package: str | None,
    predicate: str | None,
    as_json: bool,
) -> None:
    """Follow TABLE into FAMILY: install its triggers and queue the rows already there (run as its owner)."""
    with app(ctx).store() as store:
        source, queued = store.sync_add(
            family,
            table,
            id_column=id_column,
            text_columns=text_columns,
            metadata_columns=metadata_columns,
            package=package,
            predicate=predicate,
        )
    if as_json:
        emit_json(source.as_dict() | {"queued": queued})
        return
    click.echo(terminal_safe(f"{source.family} follows {source.name}; {queued} rows queued (run `ragstore sync run`)"))


@sync_group.command("alter")
@click.argument("family")
@click.option("--table", required=True, help="The followed table, SCHEMA.TABLE.")
@click.option("--text", "text_columns", multiple=True, help="The text columns, replacing the old ones (repeat).")
@click.option("--metadata", "metadata_columns", multiple=True, help="The metadata columns, replacing the old ones.")
@click.option("--no-metadata", is_flag=True, help="Store no metadata column any more.")
@click.option("--package", default=None, help="A column or an SQL expression whose value is the package_path.")
@click.option("--no-package", is_flag=True, help="The package_path is <table>/<id> again.")
@click.option("--where", "predicate", default=None, help="A new SQL expression: follow only those rows.")
@click.option("--no-where", is_flag=True, help="Follow every row again.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def sync_alter(
    ctx: click.Context,
    family: str,
    table: str,
    text_columns: tuple[str, ...],
    metadata_columns: tuple[str, ...],
    no_metadata: bool,
    package: str | None,
    no_package: bool,
    predicate: str | None,
    no_where: bool,
    as_json: bool,
) -> None:
    """Change what FAMILY follows of TABLE in place; only the rows the change concerns are queued again."""
    from ragstore.errors import InvalidInput

    for given, flag, other in (
        (metadata_columns, "--no-metadata", no_metadata),
        (package, "--no-package", no_package),
        (predicate, "--no-where", no_where),
    ):
        if given and other:
            raise InvalidInput(f"sync alter: {flag} and a value for the same setting: give one")
    changes: dict[str, Any] = {}
    if text_columns:
        changes["text_columns"] = list(text_columns)
    if metadata_columns or no_metadata:
        changes["metadata_columns"] = list(metadata_columns)
    if package is not None or no_package:
        changes["package"] = package
    if predicate is not None or no_where:
        changes["predicate"] = predicate
    if not changes:
        raise InvalidInput("sync alter: nothing to change (give --text, --metadata, --package or --where)")
    with app(ctx).store() as store:
        source, queued = store.sync_alter(family, table, **changes)
    if as_json:
        emit_json(source.as_dict() | {"queued": queued})
        return
    click.echo(terminal_safe(f"{source.family} follows {source.name} as altered; {queued} rows queued again"))


@sync_group.command("list")
@click.argument("families", nargs=-1)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def sync_list(ctx: click.Context, families: tuple[str, ...], as_json: bool) -> None:
    """The tables each family follows, with their columns and predicate."""
    with app(ctx).store() as store:
        sources = store.sync_list(families or None)
    if as_json:
        emit_json([s.as_dict() for s in sources])
        return
    for s in sources:
        fields = [s.family, s.name, f"id={s.id_column}", f"text={','.join(s.text_columns)}"]
        fields += [f"metadata={','.join(s.metadata_columns)}"] if s.metadata_columns else []
        fields += [f"where {s.predicate}"] if s.predicate else []
        click.echo("\t".join(terminal_safe(f) for f in fields))


@sync_group.command("show")
@click.argument("family")
@click.option("--table", required=True, help="The followed table, SCHEMA.TABLE.")
@click.pass_context
def sync_show(ctx: click.Context, family: str, table: str) -> None:
    """What FAMILY follows of TABLE (columns, predicate, followed columns) and its status, as JSON."""
    with app(ctx).store() as store:
        shown = store.sync_show(family, table)
    emit_json(shown)


@sync_group.command("remove")
@click.argument("family")
@click.option("--table", required=True, help="The followed table, SCHEMA.TABLE.")
@click.option("--delete-chunks", is_flag=True, help="Delete the chunks this table's rows were written to as well.")
@click.pass_context
def sync_remove(ctx: click.Context, family: str, table: str, delete_chunks: bool) -> None:
    """Stop following TABLE: drop its triggers and queue; the family's chunks stay unless --delete-chunks."""
    with app(ctx).store() as store:
        source, deleted = store.sync_remove(family, table, delete_chunks=delete_chunks)
    kept = f"deleted {deleted} chunks" if delete_chunks else "its chunks kept"
    click.echo(terminal_safe(f"{source.family} no longer follows {source.name}; {kept}"))


@sync_group.command("run")
@click.argument("families", nargs=-1)
@click.option("--once", "mode", flag_value="once", default=True, help="Sync what is queued, then exit (default).")
@click.option("--follow", "mode", flag_value="follow", help="Keep syncing, woken by the triggers' NOTIFY.")
@click.option("--batch-size", type=click.IntRange(1, 100_000), default=1000, show_default=True)
@click.option(
    "--workers", type=click.IntRange(1, 64), default=1, show_default=True, help="Workers (connections) at once."
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def sync_run(
    ctx: click.Context, families: tuple[str, ...], mode: str, batch_size: int, workers: int, as_json: bool
) -> None:
    """Write the queued rows of FAMILIES (all by default) as `ragstore index` would; delete deleted rows' chunks."""
    from ragstore.sync.worker import RunReport, follow_workers

    def show(report: RunReport) -> None:
        if as_json:
            emit_json(report.as_dict())
        else:
            click.echo(terminal_safe(report.summary()))

    if mode == "once":
        with app(ctx).store() as store:
            report = store.sync_run(families or None, batch_size=batch_size, workers=workers)
        show(report)
        return
    stopping = {"now": False}

    def stop(*_: Any) -> None:
        stopping["now"] = True

    signal.signal(signal.SIGTERM, stop)
    try:
        follow_workers(
            app(ctx).dsn,
            families or None,
            batch=batch_size,
            workers=workers,
            stop=lambda: stopping["now"],
            on_report=show,
        )
    except KeyboardInterrupt:
        stopping["now"] = True


@sync_group.command("status")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def sync_status(ctx: click.Context, as_json: bool) -> None:
    """Per followed table: rows queued, lag (age of the oldest change not synced), backoff, last error, rows/s."""
    with app(ctx).store() as store:
        rows = store.sync_status()
    if as_json:
        emit_json(rows)
        return
    for r in rows:
        rate = f"{r['rows_per_second']:.0f} rows/s" if r["rows_per_second"] else "-"
        fields = [
            r["family"],
            f"{r['schema']}.{r['table']}",
            f"queued {r['queued']} ({r['backing_off']} backing off, {r['leased']} being synced)",
            f"lag {r['lag_seconds']:.1f}s",
            f"{r['synced_keys']} rows synced",
            rate,
        ]
        fields += [f"last error: {r['last_error']}"] if r["last_error"] else []
        click.echo("\t".join(terminal_safe(str(f)) for f in fields))
