"""The readers a folder walk chooses from, by file extension: built in, and registered by other packages.

Built in (``python -m ragstore.ingest.formats`` is not needed; :data:`BUILTIN` lists them): plain text and
files without an extension (sniffed for UTF-8 text), Markdown with YAML front matter, HTML, man pages
(``.1``...``.9``, with a section suffix such as ``.1ssl`` or ``.3pm``), and, each behind an extra,
reStructuredText (``ragstore[rst]``; read as plain text without it), PDF (``ragstore[pdf]``) and DOCX
(``ragstore[docx]``). A ``.gz`` file is read by the reader of the name without ``.gz``, gunzipped first
(at most :data:`MAX_GUNZIPPED` bytes).

Another package registers a reader in the entry-point group ``ragstore.readers``: the entry point names
an object that is a :class:`~ragstore.ingest.document.Reader`, or a class or callable returning one. Its suffixes
take precedence over the built-in ones. :meth:`Readers.register` does the same from a program.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import entry_points

from ragstore.errors import InvalidInput
from ragstore.ingest.document import Document, Reader, Unreadable

__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "MAX_GUNZIPPED", "Builtin", "Choice", "Readers", "gunzip"]

ENTRY_POINT_GROUP = "ragstore.readers"
#: A ``.gz`` file is refused once it inflates past this (a gzip bomb is not read into memory).
MAX_GUNZIPPED = 64 * 1024 * 1024
# A man page's extension: its section digit, then letters of a sub-section (.1ssl, .3pm, .8posix).
_MAN_SUFFIX = re.compile(r"\.([1-9])[a-z][a-z0-9]*")


@dataclass(frozen=True)
class Builtin:
    """A reader shipped with ragstore: ``module`` holds its ``read(data, path) -> Document``; ``needs``
    are the modules of the extra it requires; ``fallback`` names the reader used when they are missing
    (None: its files are listed as not read, with ``install ragstore[<extra>]``)."""

    name: str
    suffixes: tuple[str, ...]
    module: str
    needs: tuple[str, ...] = ()
    extra: str = ""
    fallback: str | None = None

    def missing(self) -> str | None:
        for module in self.needs:
            if importlib.util.find_spec(module) is None:
                return f"install ragstore[{self.extra}]"
        return None

    def read(self, data: bytes, path: str) -> Document:
        reader = importlib.import_module(self.module)
        document: Document = reader.read(data, path)
        return document


_PKG = "ragstore.ingest.formats"
BUILTIN: tuple[Builtin, ...] = (
    Builtin("text", (".txt", ".text", ""), f"{_PKG}.text"),
    Builtin("markdown", (".md", ".markdown"), f"{_PKG}.markdown"),
    Builtin("html", (".html", ".htm", ".xhtml"), f"{_PKG}.html"),
    Builtin("man", tuple(f".{n}" for n in range(1, 10)), f"{_PKG}.man"),
    Builtin("rst", (".rst",), f"{_PKG}.rst", needs=("docutils",), extra="rst", fallback="text"),
    Builtin("pdf", (".pdf",), f"{_PKG}.pdf", needs=("pypdf",), extra="pdf"),
    Builtin("docx", (".docx",), f"{_PKG}.docx", needs=("docx",), extra="docx"),
)


@dataclass(frozen=True)
class Choice:
    """The reader chosen for a file: ``reader`` (None when there is none), whether the file is gzipped,
    the extension it was chosen by (``.pdf.gz``: the key a walk counts files it does not read under) and,
    when the reader cannot run here, ``missing`` (``install ragstore[pdf]``)."""

    reader: Reader | None
    gzipped: bool
    suffix: str
    missing: str | None = None


class Readers:
    """Readers by extension: the built-in ones, then those of the ``ragstore.readers`` entry points
    (unless ``plugins`` is False), then any :meth:`register`-ed; a later reader of an extension wins."""

    def __init__(self, *, plugins: bool = True) -> None:
        self._by_suffix: dict[str, Reader] = {}
        self._by_name: dict[str, Reader] = {}
        for builtin in BUILTIN:
            self.register(builtin)
        if plugins:
            for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
                try:
                    loaded = point.load()
                    reader = loaded() if isinstance(loaded, type) or not isinstance(loaded, Reader) else loaded
                except Exception as exc:
                    raise InvalidInput(
                        f"reader entry point {point.name} = {point.value} ({ENTRY_POINT_GROUP}): cannot load: {exc}"
                    ) from exc
                self.register(reader, where=f"entry point {point.name} = {point.value}")

    def register(self, reader: Reader, *, where: str = "") -> None:
        """Read files of ``reader.suffixes`` with ``reader`` from now on; InvalidInput when it is not a
        reader (no ``name``, ``suffixes`` and ``read``) or a suffix is not ``""`` or ``.something``."""
        label = where or repr(reader)
        if not isinstance(reader, Reader):
            raise InvalidInput(f"{label}: not a reader (it needs name, suffixes and read(data, path))")
        for suffix in reader.suffixes:
            if suffix and (not suffix.startswith(".") or suffix != suffix.lower() or "/" in suffix):
                raise InvalidInput(f"{label}: suffix {suffix!r}: give lower-case extensions such as '.html'")
            self._by_suffix[suffix] = reader
        self._by_name[reader.name] = reader

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def choose(self, filename: str) -> Choice:
        """The reader of a file named ``filename`` (its extension decides, in lower case)."""
        lower = filename.lower()
        gzipped = lower.endswith(".gz") and len(lower) > 3
        inner = lower[:-3] if gzipped else lower
        suffix = os.path.splitext(inner)[1]
        if inner.startswith(".") and suffix == "":
            suffix = inner  # ".gitignore": no reader, counted as hidden by the walk
        key = suffix + (".gz" if gzipped else "")
        reader = self._by_suffix.get(suffix)
        if reader is None and (man := _MAN_SUFFIX.fullmatch(suffix)):
            reader = self._by_suffix.get(f".{man.group(1)}")
        if reader is None:
            return Choice(None, gzipped, key)
        check = getattr(reader, "missing", None)
        missing = check() if callable(check) else None
        if missing is not None and isinstance(reader, Builtin) and reader.fallback is not None:
            return Choice(self._by_name[reader.fallback], gzipped, key)
        return Choice(reader, gzipped, key, missing)

    @classmethod
    def of(cls, readers: Iterable[Reader]) -> Readers:
        """The built-in readers with ``readers`` registered over them, without entry points."""
        made = cls(plugins=False)
        for reader in readers:
            made.register(reader)
        return made


def gunzip(data: bytes, limit: int = MAX_GUNZIPPED) -> bytes:
    """``data`` inflated (every gzip member); Unreadable when it is not gzip or inflates past ``limit``."""
    out = bytearray()
    rest = data
    try:
        while rest:
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out += inflater.decompress(rest, limit + 1 - len(out))
            if len(out) > limit:
                raise Unreadable(f"more than {limit // (1024 * 1024)} MB once gunzipped")
            if not inflater.eof:
                if inflater.unconsumed_tail:
                    raise Unreadable(f"more than {limit // (1024 * 1024)} MB once gunzipped")
                raise Unreadable("truncated gzip data")
            rest = inflater.unused_data.lstrip(b"\x00")
    except zlib.error as exc:
        raise Unreadable(f"not valid gzip data ({exc})") from exc
    return bytes(out)
