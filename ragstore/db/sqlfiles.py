"""Named SQL blocks kept in ``ragstore/sql/*.sql`` files.

A file holds blocks introduced by a comment line ``-- name: <block_name>``; ``query("ingest",
"merge_chunks")`` returns that block's text. Names of tables are placeholders such as ``{table}``,
filled by the callers only through :func:`psycopg.sql.SQL.format` with :class:`psycopg.sql.Identifier` values.

The text returned is the block without its comments and with each run of white space outside quotes made
one space (:func:`compact`): the comments are for people reading the file, and psycopg converts a
statement's placeholders once and remembers the result only for statements of at most 4,096 bytes
(longer ones are converted again on every call).
"""

from __future__ import annotations

import functools
import re
from importlib import resources

_NAME = re.compile(r"^--\s*name:\s*([a-z0-9_]+)\s*$", re.MULTILINE)
# A quoted string or identifier or a dollar-quoted body (kept as they are), or a run of white space and
# comments (one space).
_TOKEN = re.compile(
    r"""(?P<keep>'(?:[^']|'')*'|"(?:[^"]|"")*"|(?P<dollar>\$[A-Za-z_]*\$)[\s\S]*?(?P=dollar))"""
    r"""|(?:\s+|--[^\n]*|/\*[\s\S]*?\*/)+""",
)


def compact(text: str) -> str:
    """``text`` (SQL) without its ``--`` and ``/* */`` comments, each run of white space outside quoted
    strings, quoted identifiers and dollar-quoted bodies made one space; those three kept as they are."""

    def one(match: re.Match[str]) -> str:
        if match.group("keep") is not None:
            return match.group("keep")
        return " "  # white space and comments: a separator

    return _TOKEN.sub(one, text).strip()


@functools.cache
def _blocks(file: str) -> dict[str, str]:
    text = resources.files("ragstore.sql").joinpath(f"{file}.sql").read_text(encoding="utf-8")
    parts = _NAME.split(text)
    return {name: compact(body) for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def query(file: str, name: str) -> str:
    """The SQL text of block ``name`` in ``ragstore/sql/<file>.sql``, without its comments (:func:`compact`)."""
    try:
        return _blocks(file)[name]
    except KeyError:
        raise KeyError(f"no SQL block {name!r} in ragstore/sql/{file}.sql") from None
