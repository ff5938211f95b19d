"""``ragstore migrate``, ``ragstore vacuum`` and ``ragstore server``."""

from __future__ import annotations

import click

from ragstore import config, migrate
from ragstore.cli.main import app, echo_stopped, emit_json, human_size
from ragstore.common.fields import fields_dict
from ragstore.db.connection import mask_dsn
from ragstore.db.server import EmbeddedServer


@click.command("migrate")
@click.option("--status", "show_status", is_flag=True, help="Show the current and head revisions; change nothing.")
@click.option("--sql", "offline", is_flag=True, help="Print the DDL to head without touching any database.")
@click.option(
    "--citus", "on_citus", is_flag=True, help="With --sql: add the statements that distribute the tables on Citus."
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def migrate_command(ctx: click.Context, show_status: bool, offline: bool, on_citus: bool, as_json: bool) -> None:
    """Create or upgrade the ragstore schema (Alembic to head, under an advisory lock)."""
    if offline:
        click.echo(migrate.offline_sql(on_citus=on_citus), nl=False)
        return
    with app(ctx).store() as store:
        if show_status:
            status = store.migration_status()
            if as_json:
                emit_json({"current": status.current, "head": status.head, "up_to_date": status.up_to_date})
            else:
                state = "up to date" if status.up_to_date else "behind head: run `ragstore migrate`"
                click.echo(f"current: {status.current or '(none)'}  head: {status.head}  ({state})")
            return
        result = store.migrate()
    if as_json:
        emit_json(
            {
                "before": result.before,
                "after": result.after,
                "applied": list(result.applied),
                "replaced": list(result.replaced),
            }
        )
    elif result.applied:
        click.echo(f"migrated {result.before or '(empty)'} -> {result.after}: applied {', '.join(result.applied)}")
    elif result.replaced:
        click.echo(f"at head ({result.after}): re-applied {', '.join(result.replaced)}")
    else:
        click.echo(f"already at head ({result.after}): nothing to do")


@click.command("vacuum")
@click.argument("family", required=False)
@click.option(
    "--full",
    is_flag=True,
    help="Rewrite each table compactly (VACUUM FULL): returns all free space, but locks each table while it runs.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def vacuum_command(ctx: click.Context, family: str | None, full: bool, as_json: bool) -> None:
    """Return to the disk the space that drops, prunes and deletes left in the tables (owner role only).

    With FAMILY: that family's table and the tables all families share; without: every ragstore table.
    """
    with app(ctx).store() as store:
        report = store.vacuum(family, full=full)
    if as_json:
        emit_json(report.as_dict())
        return
    db_before, db_after = report.database
    what = "vacuum --full" if full else "vacuum"
    click.echo(
        f"{what}: {human_size(report.reclaimed)} returned to the disk "
        f"(database {human_size(db_before)} -> {human_size(db_after)}, {len(report.tables)} tables)"
    )
    for name, (before, after) in sorted(report.tables.items()):
        if before != after:
            click.echo(f"  ragstore.{name}: {human_size(before)} -> {human_size(after)}")
    if not full:
        click.echo(
            "note: a plain vacuum frees dead rows for reuse and returns only the empty pages at the end of each "
            "table; `ragstore vacuum --full` returns all free space (it locks each table while it rewrites it)"
        )


@click.group("server")
def server_group() -> None:
    """The embedded PostgreSQL that ragstore runs when no RAGSTORE_DSN is set."""


def _server() -> EmbeddedServer:
    return EmbeddedServer(config.home_dir())


@server_group.command("status")
@click.option("--json", "as_json", is_flag=True)
def server_status(as_json: bool) -> None:
    """Show where the embedded server keeps its data and whether it runs."""
    st = _server().status()
    data = fields_dict(st, "data_dir", "initialised", "running", "pid", "dsn", data_dir=str(st.data_dir))
    data["external_dsn"] = mask_dsn(config.dsn_from_env() or "") or None
    if as_json:
        emit_json(data)
        return
    state = f"running (pid {st.pid})" if st.running else ("stopped" if st.initialised else "not created yet")
    click.echo(f"embedded server: {state}\ndata: {st.data_dir}")
    if st.dsn:
        click.echo(f"dsn: {st.dsn}")
    if data["external_dsn"]:
        click.echo(f"note: RAGSTORE_DSN is set ({data['external_dsn']}); commands use that server instead")


@server_group.command("start")
def server_start() -> None:
    """Start the embedded server (commands also start it on demand)."""
    dsn = _server().ensure_running()
    click.echo(f"embedded server running: {dsn}")


@server_group.command("stop")
def server_stop() -> None:
    """Stop the embedded server (data is kept)."""
    echo_stopped("embedded server", _server().stop())
