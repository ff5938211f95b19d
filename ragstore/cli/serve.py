"""``ragstore serve``: the HTTP JSON API (ragstore/serve/app.py) under uvicorn."""

from __future__ import annotations

import ipaddress
import os

import click

from ragstore import config
from ragstore.cli.app import CliError, app


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option("--allow-remote", is_flag=True, help="Allow a --host that is not a loopback address.")
@click.option(
    "--pool-size", type=click.IntRange(1, 64), default=4, show_default=True, help="Connections per token role."
)
@click.option(
    "--max-body",
    type=click.IntRange(1024),
    default=4 * 1024 * 1024,
    show_default=True,
    help="Largest request body, in bytes.",
)
@click.option(
    "--statement-timeout",
    default="30s",
    show_default=True,
    help=f"Each statement's limit (${config.TIMEOUT_ENV} wins when set).",
)
@click.option(
    "--shutdown-timeout",
    type=click.IntRange(1),
    default=30,
    show_default=True,
    help="Seconds in-flight requests get on SIGTERM.",
)
@click.pass_context
def serve_command(
    ctx: click.Context,
    host: str,
    port: int,
    allow_remote: bool,
    pool_size: int,
    max_body: int,
    statement_timeout: str,
    shutdown_timeout: int,
) -> None:
    """Serve the HTTP JSON API (search, chunks, families) with bearer tokens; each request runs as its token's role."""
    try:
        import uvicorn

        from ragstore.serve.app import Settings, asgi_app
    except ImportError as exc:
        raise CliError(
            f"ragstore serve needs the server extra: pip install 'ragstore[server]' ({exc.name} is missing)"
        ) from None
    from ragstore.db.connection import resolve_dsn
    from ragstore.db.connection import statement_timeout as checked_timeout

    if not loopback(host) and not allow_remote:
        raise CliError(
            f"--host {host} is not a loopback address: add --allow-remote to listen there (and put TLS in front)"
        )
    os.environ.setdefault(config.TIMEOUT_ENV, statement_timeout)
    checked_timeout()  # a malformed value stops here, in one line
    settings = Settings(dsn=resolve_dsn(app(ctx).dsn), pool_size=pool_size, max_body=max_body)
    click.echo(
        f"ragstore serve: http://{host}:{port} (Ctrl-C or SIGTERM stops it after the requests in flight)", err=True
    )
    uvicorn.run(
        asgi_app(settings),
        host=host,
        port=port,
        log_level="info" if app(ctx).debug else "warning",
        access_log=app(ctx).debug,
        timeout_graceful_shutdown=shutdown_timeout,
        server_header=False,
    )
