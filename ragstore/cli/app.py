"""What every command shares: the click group that maps errors to one line, and the connection."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
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

    def store(self) -> Store:
        """The Store a command calls (:meth:`Store.direct`: no pool, a connection opened on first use) on
        ``--dsn``, else ``$RAGSTORE_DSN``, else the embedded server, started if needed: the command line
        is the one door that starts it on its own."""
        from ragstore.db.connection import resolve_dsn
        from ragstore.store import Store

        return Store.direct(resolve_dsn(self.dsn))


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
