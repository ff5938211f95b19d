"""The one reader of line-oriented input files (JSONL records, JSONL queries, TSV qrels).

:func:`read_lines` yields the non-blank lines of a file with their ``file:line`` place, decoded as UTF-8
(a byte-order mark on the first line is dropped); :func:`read_objects` parses each as a JSON object.
Every problem is one :class:`~ragstore.errors.InvalidInput` (or :class:`~ragstore.errors.NotFound`)
naming the file and the line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from ragstore.common.strictjson import MAX_DEPTH, nesting_depth
from ragstore.errors import InvalidInput, NotFound

__all__ = ["MAX_LINE_BYTES", "Line", "read_lines", "read_objects", "read_raw_lines"]

MAX_LINE_BYTES = 16 * 1024 * 1024


class Line(NamedTuple):
    """A non-blank line: ``where`` is ``file:number``, ``text`` the line without its end-of-line."""

    where: str
    number: int
    text: str


def read_raw_lines(path: str | os.PathLike[str], *, label: str | None = None) -> Iterator[tuple[str, int, bytes]]:
    """``(where, number, bytes)`` for each non-blank line of ``path``, without its end of line (and without a
    byte-order mark on line 1), not decoded: the bytes as they are in the file.

    Raises NotFound for a missing file, InvalidInput for a folder, an unreadable file or a line longer than
    :data:`MAX_LINE_BYTES`.
    """
    name = label or str(path)
    try:
        handle = Path(path).open("rb")
    except FileNotFoundError as exc:
        raise NotFound(f"{name}: no such file") from exc
    except IsADirectoryError as exc:
        raise InvalidInput(f"{name}: is a directory, expected a file") from exc
    except OSError as exc:
        raise InvalidInput(f"{name}: cannot read: {exc.strerror}") from exc
    with handle:
        number = 0
        while True:
            try:
                raw = handle.readline(MAX_LINE_BYTES + 1)
            except OSError as exc:
                raise InvalidInput(f"{name}: cannot read: {exc.strerror}") from exc
            if not raw:
                return
            number += 1
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                raise InvalidInput(f"{name}:{number}: line longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB")
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            data = raw.rstrip(b"\r\n")
            if data.strip():
                yield f"{name}:{number}", number, data


def read_lines(path: str | os.PathLike[str], *, label: str | None = None) -> Iterator[Line]:
    """The non-blank lines of ``path`` (``label`` names it in messages; the path by default), decoded.

    Raises what :func:`read_raw_lines` raises, and InvalidInput for a line that is not UTF-8.
    """
    for where, number, data in read_raw_lines(path, label=label):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{where}: invalid UTF-8 at byte {exc.start}") from exc
        if text.strip():
            yield Line(where, number, text)


def read_objects(path: str | os.PathLike[str], *, label: str | None = None) -> Iterator[tuple[Line, dict[str, Any]]]:
    """Each non-blank line of ``path`` parsed as a JSON object, with its :class:`Line`.

    Raises what :func:`read_lines` raises, and InvalidInput for a line that is not JSON, not an object, or
    nested deeper than :data:`~ragstore.common.strictjson.MAX_DEPTH` (checked before parsing).
    """
    for line in read_lines(path, label=label):
        if (depth := nesting_depth(line.text)) > MAX_DEPTH:
            raise InvalidInput(f"{line.where}: JSON nested {depth} levels deep; at most {MAX_DEPTH} are accepted")
        try:
            value = json.loads(line.text)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{line.where}: not valid JSON: {exc.msg}") from exc
        if not isinstance(value, dict):
            raise InvalidInput(f"{line.where}: expected a JSON object, got {type(value).__name__}")
        yield line, value
