"""What every command shares: the click group that maps errors to one line, and the connection."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

import click

from ragstore.errors import RagstoreError, mask_secrets

if TYPE_CHECKING:
    import psycopg

EXIT_ERROR = 1
EXIT_INTERNAL = 2


class CliError(click.ClickException):
    """A one-line error: ``error: <message>`` on stderr and a non-zero exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True, file=file)


@dataclass
class AppContext:
    dsn: str | None
    debug: bool

    def connect(self) -> psycopg.Connection[Any]:
        from ragstore.db.connection import connect

        return connect(self.dsn)


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


def emit_json(data: Any) -> None:
    """Machine-readable output: one JSON document on stdout."""
    click.echo(json.dumps(data, ensure_ascii=False, sort_keys=True, indent=2, default=str))


def interactive() -> bool:
    return sys.stderr.isatty()
