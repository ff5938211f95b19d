"""Named SQL blocks kept in ``ragstore/sql/*.sql`` files.

A file holds blocks introduced by a comment line ``-- name: <block_name>``; ``query("ingest",
"merge_chunks")`` returns that block's text. Names of tables are placeholders such as ``{table}``,
filled by the callers only through :func:`psycopg.sql.SQL.format` with :class:`psycopg.sql.Identifier` values.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

_NAME = re.compile(r"^--\s*name:\s*([a-z0-9_]+)\s*$", re.MULTILINE)


@functools.cache
def _blocks(file: str) -> dict[str, str]:
    text = resources.files("ragstore.sql").joinpath(f"{file}.sql").read_text(encoding="utf-8")
    parts = _NAME.split(text)
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def query(file: str, name: str) -> str:
    """The SQL text of block ``name`` in ``ragstore/sql/<file>.sql``."""
    try:
        return _blocks(file)[name]
    except KeyError:
        raise KeyError(f"no SQL block {name!r} in ragstore/sql/{file}.sql") from None
