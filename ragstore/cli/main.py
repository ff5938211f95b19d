"""The ``ragstore`` command: parse, call one library function, print; and what every command shares (the
group that maps errors to one line, the Store a command calls, the output helpers).

Each command's module is imported only when that command runs (or its own ``--help`` is asked), so
``ragstore --help`` and a search do not pay for importing Alembic, the memory stores or the evaluation
code. The one-line summaries ``ragstore --help`` lists are kept here; a test checks that each equals
the first sentence of its command's help.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, TypeVar

import click

from ragstore.errors import RagstoreError, mask_secrets

if TYPE_CHECKING:
    from ragstore.store import Store

F = TypeVar("F", bound=Callable[..., Any])

EXIT_ERROR = 1
EXIT_INTERNAL = 2


class CliError(click.ClickException):
    """A one-line error: ``error: <message>`` on stderr and a non-zero exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {terminal_safe(self.format_message())}", err=True, file=file)


# C0 and C1 controls (newline, carriage return, escape…), DEL, the Unicode line/paragraph separators and
# the bidirectional overrides: what would let a stored value start a line, move the cursor or recolour;
# and lone surrogates (an undecodable byte of a file name or argument), which no terminal encoding prints.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """``text`` with every control character escaped (``\\n``, ``\\x1b``, ``\\u2028``…), so that a value
    read from the store (a chunk id, a family name, a message quoting one) prints as exactly one line and
    cannot send escape sequences to the terminal. JSON output does not go through this: it escapes itself.
    """
    return _UNSAFE.sub(_escape, text)


@dataclass
class AppContext:
    dsn: str | None
    debug: bool

    @contextlib.contextmanager
    def store(self) -> Iterator[Store]:
        """The Store a command calls, for the ``with`` block, closed when it ends (:meth:`Store.direct`: no
        pool, a connection opened on first use) on ``--dsn``, else ``$RAGSTORE_DSN``, else the embedded
        server, started if needed: the command line is the one door that starts it on its own."""
        from ragstore.db.connection import resolve_dsn
        from ragstore.store import Store

        store = Store.direct(resolve_dsn(self.dsn))
        try:
            yield store
        finally:
            store.close()


class RagstoreGroup(click.Group):
    """A group that turns a RagstoreError into one clear line, and any other exception into one line
    that says ``--debug`` shows the traceback (which ``--debug`` then does)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit):
            raise
        except KeyboardInterrupt:
            raise CliError("interrupted; batches committed so far are kept, rerun to finish", 130) from None
        except RagstoreError as exc:
            if _debug(ctx):
                raise
            raise CliError(str(exc)) from exc
        except Exception as exc:
            if _debug(ctx):
                raise
            raise CliError(
                f"internal error: {type(exc).__name__}: {mask_secrets(str(exc))} (run with --debug for a traceback)",
                EXIT_INTERNAL,
            ) from exc


def _debug(ctx: click.Context) -> bool:
    root = ctx.find_root()
    return bool(isinstance(root.obj, AppContext) and root.obj.debug)


def app(ctx: click.Context) -> AppContext:
    obj = ctx.find_root().obj
    assert isinstance(obj, AppContext)
    return obj


def count_option(flag: str, most: int, default: int, help_text: str) -> Callable[[F], F]:
    """The option ``flag``: a whole number from 1 to ``most``, ``default`` when not given (shown by --help)."""
    return click.option(flag, type=click.IntRange(1, most), default=default, show_default=True, help=help_text)


def echo_stopped(what: str, stopped: bool) -> None:
    """Say whether ``stop`` stopped ``what`` or found it not running."""
    click.echo(f"{what} stopped" if stopped else f"{what} was not running")


def emit_json(data: Any) -> None:
    """Machine-readable output: one JSON document on stdout."""
    click.echo(json.dumps(data, ensure_ascii=False, sort_keys=True, indent=2, default=str))


def human_size(n: int) -> str:
    """A byte count as people read it: ``512 B``, ``1.5 kB``, ``20.0 MB``, up to GB (binary steps)."""
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def interactive() -> bool:
    return sys.stderr.isatty()


# command name -> (module, attribute, the one-line summary ``ragstore --help`` shows)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "check-recall": (
        "ragstore.cli.search",
        "check_recall_command",
        "Measure FAMILY's HNSW recall@k against the exact top k, with latency of each path.",
    ),
    "cluster": (
        "ragstore.cli.cluster",
        "cluster_group",
        "A local Citus cluster (a coordinator and workers over Unix sockets) for tests and demos.",
    ),
    "context-pack": (
        "ragstore.cli.context",
        "context_pack",
        "Build the layered context pack (L0 brief … L7 manifest) as canonical JSON or Markdown.",
    ),
    "delete": (
        "ragstore.cli.chunks",
        "delete_command",
        "Delete chunks of FAMILY by id (--id) or by package_path prefix (--package); other families are untouched.",
    ),
    "embed": (
        "ragstore.cli.embed",
        "embed_group",
        "Embed texts ad hoc (similarity, ranking, vectors) with any backend, without an index.",
    ),
    "eval": (
        "ragstore.cli.eval",
        "eval_command",
        "Run the queries against FAMILY in each mode and print recall, precision, MRR, nDCG, hit@k and latency.",
    ),
    "export": (
        "ragstore.cli.chunks",
        "export_command",
        "Write FAMILY's chunks as JSONL or Parquet records that `ragstore index` reads back to the same chunks.",
    ),
    "family": (
        "ragstore.cli.family",
        "family_group",
        "Embedding families: one backend + model + dimension, each with its own table.",
    ),
    "get": (
        "ragstore.cli.chunks",
        "get_command",
        "Print the chunks of FAMILY with these IDS (text and metadata); exit 1 when some are not found.",
    ),
    "index": (
        "ragstore.cli.index",
        "index_command",
        "Index .jsonl/.ndjson/.parquet/.npy files, .txt/.md/.rst documents, folders, or - (JSONL on stdin)"
        " into FAMILY.",
    ),
    "list": (
        "ragstore.cli.chunks",
        "list_command",
        "List the chunk ids of FAMILY in (package_path, chunk_id) order, a page at a time, with the counts.",
    ),
    "mcp": (
        "ragstore.cli.mcp",
        "mcp_command",
        "Serve ragstore's tools (search, families, chunks, context packs, memory) to MCP clients.",
    ),
    "memory": (
        "ragstore.cli.memory",
        "memory_group",
        "Agent memory: five append-only stores, composition by recency, recall by meaning.",
    ),
    "migrate": (
        "ragstore.cli.admin",
        "migrate_command",
        "Create or upgrade the ragstore schema (Alembic to head, under an advisory lock).",
    ),
    "search": (
        "ragstore.cli.search",
        "search_command",
        "Search FAMILY for QUERY (embedded with the family's own backend); hits cite [package_path#chunk_id].",
    ),
    "serve": (
        "ragstore.cli.serve",
        "serve_command",
        (
            "Serve the HTTP JSON API (families, search, chunks, agent memory, context packs) with bearer tokens;"
            " each request runs as its token's database role."
        ),
    ),
    "server": (
        "ragstore.cli.admin",
        "server_group",
        "The embedded PostgreSQL that ragstore runs when no RAGSTORE_DSN is set.",
    ),
    "sync": (
        "ragstore.cli.sync",
        "sync_group",
        "Families that follow tables of the same database: triggers queue changed rows, `sync run` writes them.",
    ),
    "token": (
        "ragstore.cli.token",
        "token_group",
        "Bearer tokens of `ragstore serve`, each mapped to a database role (owner role only).",
    ),
    "vacuum": (
        "ragstore.cli.admin",
        "vacuum_command",
        "Return to the disk the space that drops, prunes and deletes left in the tables (owner role only).",
    ),
}


def load_command(name: str) -> click.Command:
    """Import the module of command ``name`` and return its click command."""
    module, attribute, _ = COMMANDS[name]
    command: object = getattr(importlib.import_module(module), attribute)
    assert isinstance(command, click.Command), f"{module}.{attribute} is not a click command"
    if name == "family" and isinstance(command, click.Group) and "migrate" not in command.commands:
        # ``family migrate`` lives in its own module, imported with its group as every command is.
        migrate: object = importlib.import_module("ragstore.cli.family_migrate").family_migrate_command
        assert isinstance(migrate, click.Command)
        command.add_command(migrate)
    return command


class LazyGroup(RagstoreGroup):
    """The top-level group: commands are imported when used; the listing uses the summaries above.
    A command added the usual way (``cli.add_command``) works too, imported eagerly."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        if cmd_name not in COMMANDS:
            return None
        return load_command(cmd_name)

    def _summary(self, name: str, limit: int) -> str:
        if name in self.commands:
            return self.commands[name].get_short_help_str(limit)
        # A stand-in command with the summary as its help shortens it exactly as the real one would.
        return click.Command(name, help=COMMANDS[name][2]).get_short_help_str(limit)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        with formatter.section("Commands"):
            formatter.write_dl([(name, self._summary(name, limit)) for name in names])


@click.group(cls=LazyGroup)
@click.option("--dsn", envvar="RAGSTORE_DSN", default=None, help="PostgreSQL to use (default: the embedded server).")
@click.option("--debug", is_flag=True, help="Show tracebacks of unexpected errors.")
@click.version_option(package_name="ragstore")
@click.pass_context
def cli(ctx: click.Context, dsn: str | None, debug: bool) -> None:
    """ragstore: a retrieval store for RAG on PostgreSQL + pgvector."""
    configure_logging(debug)
    ctx.obj = AppContext(dsn=dsn or None, debug=debug)


def configure_logging(debug: bool) -> None:
    """What the library logs reaches stderr only with ``--debug``: a command says what matters itself, in
    one line (a HyDE fallback's ``note:``), and Python's last-resort handler would print each warning a
    second time, bare. Idempotent (the CLI runs many times in one test process)."""
    import logging

    logger = logging.getLogger("ragstore")
    for old in list(logger.handlers):
        if getattr(old, "_ragstore_cli", False):
            logger.removeHandler(old)
    handler: logging.Handler = logging.NullHandler()
    if debug:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("debug: %(name)s: %(message)s"))
    logger.setLevel(logging.DEBUG if debug else logging.NOTSET)
    handler._ragstore_cli = True  # type: ignore[attr-defined]
    logger.addHandler(handler)


def main() -> None:
    cli(prog_name="ragstore")
