"""``ragstore mcp``: the MCP server (ragstore/mcpserver/) over stdio."""

from __future__ import annotations

import click

from ragstore.cli.app import CliError, app


@click.command("mcp")
@click.option("--allow-writes", is_flag=True, help="Also offer memory_add (the database role still decides).")
@click.pass_context
def mcp_command(ctx: click.Context, allow_writes: bool) -> None:
    """Serve ragstore's tools (search, families, chunks, memory) to MCP clients over stdio, as the DSN's role."""
    try:
        from ragstore.mcpserver.server import serve_stdio
    except ImportError as exc:
        raise CliError(
            f"ragstore mcp needs the mcp extra: pip install 'ragstore[mcp]' ({exc.name} is missing)"
        ) from None
    from ragstore.db.connection import resolve_dsn

    serve_stdio(resolve_dsn(app(ctx).dsn), allow_writes=allow_writes)
