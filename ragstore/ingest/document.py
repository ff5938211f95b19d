"""What a reader returns: a document's text, cut into the sections its own structure draws.

A :class:`Reader` turns a file's bytes into a :class:`Document`: sections in reading order, each with its
heading path (``("Install", "From source")``) and, for paged formats, its page number; a title; and
metadata the format knows (a Markdown file's front matter). The chunker (:mod:`ragstore.ingest.chunker`)
cuts sections, never across them, so a chunk's heading and page are those of the section it came from.

A reader raises :class:`Unreadable` for a file it cannot read (corrupt, encrypted, no text layer): the
walk names the file on one line and ``--skip-bad-files`` leaves it out; :class:`NotThisKind` for a file
that is not of its kind at all (a binary ``libc.so.6`` matched by the man page suffixes), listed as not
read like a file without a reader. Register your own readers with :mod:`ragstore.ingest.formats`
(docs/guide/documents.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Document", "NotThisKind", "Reader", "Section", "Unreadable"]


@dataclass(frozen=True)
class Section:
    """A run of text under one heading path (``()`` before the first heading), on one page when known.

    ``blocks`` are its paragraphs, lists and code blocks when the reader knows them (the chunker keeps
    each whole where it fits, blank lines inside a code block included); without them the chunker cuts
    ``text`` at blank lines. :meth:`of` builds a section from blocks."""

    text: str
    heading: tuple[str, ...] = ()
    page: int | None = None
    blocks: tuple[str, ...] = ()

    @classmethod
    def of(cls, blocks: Sequence[str], heading: tuple[str, ...] = (), page: int | None = None) -> Section:
        kept = tuple(block for block in blocks if block.strip())
        return cls("\n\n".join(kept), heading, page, kept)


@dataclass(frozen=True)
class Document:
    """A read document: ``sections`` in reading order, its ``title`` (``""`` when it has none) and
    ``metadata`` the format carries (JSON values; keys the walk sets itself, such as ``path``, win)."""

    sections: tuple[Section, ...]
    title: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "\n\n".join(section.text for section in self.sections)


class Unreadable(Exception):
    """The file is of the reader's kind but cannot be read; ``reason`` is one short phrase, ``line`` the
    1-based line it is about, when it is about one."""

    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line


class NotThisKind(Unreadable):
    """The file is not of the reader's kind (binary where text was expected): listed as not read."""


@runtime_checkable
class Reader(Protocol):
    """A reader of one format.

    ``name`` is recorded in every chunk's metadata (``reader``, and ``format``); ``suffixes`` are the
    lower-case extensions it reads (``(".html", ".htm")``; ``""`` for files without one). ``read`` gets the
    file's bytes (gunzipped for ``.gz`` files) and its path, for messages only; it raises
    :class:`Unreadable` or :class:`NotThisKind`, never anything else on bad input.

    A reader that needs an optional library may also define ``missing() -> str | None``: None when it can
    read, else what to install (``"install ragstore[pdf]"``); the walk lists its files as not read with that
    reason.
    """

    @property
    def name(self) -> str: ...

    @property
    def suffixes(self) -> tuple[str, ...]: ...

    def read(self, data: bytes, path: str) -> Document: ...
