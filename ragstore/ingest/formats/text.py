"""Plain text, and files without an extension (``README``, ``AUTHORS``) when they are UTF-8 text."""

from __future__ import annotations

import os
import re

from ragstore.ingest.document import Document, NotThisKind, Section, Unreadable

TITLE_CHARS = 200
_RULE = re.compile(r"^[\W_]+$")


def decode(data: bytes, sniff: bool = False) -> str:
    """``data`` as UTF-8 text (a byte order mark dropped, line ends made ``\\n``); Unreadable naming the
    line of the first bad byte, or a NUL byte; with ``sniff`` (a file without an extension) NotThisKind."""
    if sniff and b"\x00" in data:
        raise NotThisKind("not text (no extension, NUL bytes): no reader for it")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if sniff:
            raise NotThisKind("not UTF-8 text (no extension): no reader for it") from exc
        raise Unreadable(f"invalid UTF-8 at byte {exc.start}", data[: exc.start].count(b"\n") + 1) from exc
    if "\x00" in text:
        raise Unreadable("contains NUL bytes (a binary file?)")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def first_line_title(text: str) -> str:
    """The first line that is not a rule or an underline, trimmed to 200 characters (``""``: none)."""
    for line in text.splitlines():
        line = line.strip()
        if line and not _RULE.match(line):
            return line[:TITLE_CHARS]
    return ""


def read(data: bytes, path: str) -> Document:
    name = os.path.basename(path).lower().removesuffix(".gz")
    text = decode(data, sniff=not os.path.splitext(name)[1])
    return Document((Section(text),), first_line_title(text))
