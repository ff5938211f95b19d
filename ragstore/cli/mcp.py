"""``ragstore mcp``: the MCP server (ragstore/mcpserver/) over stdio or streamable HTTP."""

from __future__ import annotations

import functools
import ipaddress

import click

from ragstore.cli.main import CliError, app
from ragstore.cli.search import add_options, closing, server_reranker
from ragstore.cli.serve import SERVE_RERANK_TABLE


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command("mcp")
@click.option("--allow-writes", is_flag=True, help="Also offer memory_add (the database role still decides).")
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio for a host that starts the process; http for streamable HTTP at http://HOST:PORT/mcp.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (http).")
@click.option("--port", type=click.IntRange(1, 65535), default=8765, show_default=True, help="Port (http).")
@click.option(
    "--tokens",
    "use_tokens",
    is_flag=True,
    help="http: every request needs a bearer token of `ragstore token create` and runs as its role.",
)
@click.option(
    "--allow-remote", is_flag=True, help="http: allow a --host that is not a loopback address (needs --tokens)."
)
@functools.partial(add_options, table=SERVE_RERANK_TABLE)  # the depth is the tool call's own
@click.pass_context
def mcp_command(
    ctx: click.Context,
    /,
    allow_writes: bool,
    transport: str,
    host: str,
    port: int,
    use_tokens: bool,
    allow_remote: bool,
    **remote: object,
) -> None:
    """Serve ragstore's tools (search, families, chunks, context packs, memory) to MCP clients.

    Over stdio every call runs as the DSN's role. Over http the same, unless --tokens: then each request
    runs as its bearer token's role. With --reranker-url the search tool may ask for rerank "cross".
    """
    if transport == "stdio" and (use_tokens or allow_remote):
        raise CliError("--tokens and --allow-remote apply to --transport http only")
    if transport == "http" and not _loopback(host):
        if not allow_remote:
            raise CliError(
                f"--host {host} is not a loopback address; add --allow-remote (and --tokens) to listen there"
            )
        if not use_tokens:
            raise CliError(
                "--allow-remote needs --tokens: without them anyone who reaches the port acts as the DSN's role"
            )
    try:
        from ragstore.mcpserver.server import serve_stdio
    except ImportError as exc:
        raise CliError(
            f"ragstore mcp needs the mcp extra: pip install 'ragstore[mcp]' ({exc.name} is missing)"
        ) from None
    from ragstore.db.connection import resolve_dsn

    options = dict(remote)
    reranker = server_reranker(options)
    dsn = resolve_dsn(app(ctx).dsn)
    with closing(reranker):
        if transport == "stdio":
            serve_stdio(dsn, allow_writes=allow_writes, reranker=reranker)
            return
        from ragstore.mcpserver.http import serve_http

        serve_http(dsn, host=host, port=port, allow_writes=allow_writes, use_tokens=use_tokens, reranker=reranker)
