"""The ``ragstore`` command: parse, call one library function, print."""

from __future__ import annotations

import click

from ragstore.cli.admin import migrate_command, server_group
from ragstore.cli.app import AppContext, RagstoreGroup
from ragstore.cli.context import context_pack
from ragstore.cli.embed import embed_group
from ragstore.cli.eval import eval_command
from ragstore.cli.family import family_group
from ragstore.cli.family_migrate import family_migrate_command
from ragstore.cli.index import index_command
from ragstore.cli.memory import memory_group
from ragstore.cli.search import check_recall_command, search_command


@click.group(cls=RagstoreGroup)
@click.option("--dsn", envvar="RAGSTORE_DSN", default=None, help="PostgreSQL to use (default: the embedded server).")
@click.option("--debug", is_flag=True, help="Show tracebacks of unexpected errors.")
@click.version_option(package_name="ragstore")
@click.pass_context
def cli(ctx: click.Context, dsn: str | None, debug: bool) -> None:
    """ragstore: a retrieval store for RAG on PostgreSQL + pgvector."""
    ctx.obj = AppContext(dsn=dsn or None, debug=debug)


cli.add_command(migrate_command)
cli.add_command(server_group)
cli.add_command(family_group)
cli.add_command(index_command)
cli.add_command(context_pack)
cli.add_command(search_command)
cli.add_command(check_recall_command)
cli.add_command(memory_group)
cli.add_command(embed_group)
cli.add_command(eval_command)
family_group.add_command(family_migrate_command)


def main() -> None:
    cli(prog_name="ragstore")
