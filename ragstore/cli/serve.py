"""``ragstore serve``: the HTTP JSON API (ragstore/serve/app.py) under uvicorn."""

from __future__ import annotations

import importlib.util
import ipaddress
import logging
import os

import click

from ragstore import config
from ragstore.cli.main import CliError, app
from ragstore.cli.search import (
    HYDE_TABLE,
    RERANK_TABLE,
    add_options,
    closing,
    make_hyde,
    server_reranker,
)

# The second-stage endpoints a request may ask for (``rerank: "cross"``, ``hyde: true``); the depth is the
# request's own.
SERVE_RERANK_TABLE = tuple(row for row in RERANK_TABLE if row[0] != "--rerank-depth")


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _OneLine(logging.Filter):
    """Each record on one line, secrets masked: psycopg_pool's reconnection warnings span two lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        from ragstore.errors import mask_secrets

        record.msg, record.args = " ".join(mask_secrets(record.getMessage()).split()), None
        return True


def one_line_pool_logs() -> None:
    logging.getLogger("psycopg.pool").addFilter(_OneLine())


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
@click.option(
    "--pool-timeout",
    type=click.FloatRange(0.1, 600),
    default=10.0,
    show_default=True,
    help="Seconds a request waits for a database connection before a 503.",
)
@lambda f: add_options(f, SERVE_RERANK_TABLE)
@lambda f: add_options(f, HYDE_TABLE)
@click.pass_context
def serve_command(
    ctx: click.Context,
    /,
    host: str,
    port: int,
    allow_remote: bool,
    pool_size: int,
    max_body: int,
    statement_timeout: str,
    shutdown_timeout: int,
    pool_timeout: float,
    **remote: object,
) -> None:
    """Serve the HTTP JSON API (families, search, chunks, agent memory, context packs) with bearer tokens;
    each request runs as its token's database role.

    With --reranker-url a request may ask for "rerank": "cross", with --hyde for "hyde": true; a request
    never names an endpoint itself."""
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
    options = dict(remote)
    reranker = server_reranker(options)
    hyde = make_hyde(options)
    settings = Settings(
        dsn=resolve_dsn(app(ctx).dsn),
        pool_size=pool_size,
        pool_timeout=pool_timeout,
        max_body=max_body,
        reranker=reranker,
        hyde=hyde,
    )
    one_line_pool_logs()
    click.echo(
        f"ragstore serve: http://{host}:{port} on {event_loop_and_parser()}"
        " (Ctrl-C or SIGTERM stops it after the requests in flight)",
        err=True,
    )
    with closing(reranker, hyde):
        uvicorn.run(
            asgi_app(settings),
            host=host,
            port=port,
            log_level="info" if app(ctx).debug else "warning",
            access_log=app(ctx).debug,
            timeout_graceful_shutdown=shutdown_timeout,
            server_header=False,
        )


def event_loop_and_parser() -> str:
    """What uvicorn runs on (its "auto"): uvloop and httptools when installed (the server extra installs
    them), else asyncio's loop and h11."""
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    parser = "httptools" if importlib.util.find_spec("httptools") else "h11"
    return f"{loop} and {parser}"
