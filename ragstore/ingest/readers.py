"""Where chunk records come from: chunks.jsonl files, .txt/.md documents, folders of them, or JSONL on stdin.

Every reader yields ``(where, record)`` pairs, ``where`` being ``file:line`` (or ``file#n`` for a
document's n-th chunk), and raises :class:`ragstore.errors.InvalidInput` naming the file, the line and the
field of the first bad record.

A folder walk never opens anything but regular files: FIFOs, sockets, devices, links to folders and
symbolic links that are broken, loop or lead outside the folder are skipped and reported (``Source.skipped``),
so a hostile tree can neither hang the walk nor make it read files outside the folder. Every file of the
folder a walk does not read is reported too, with its reason: no reader for its extension, a hidden file,
an extensionless file that is not UTF-8 text, a folder not walked (hidden, version control, caches).

A folder's documents are named ``<prefix>/<path under the folder>``, the prefix being the folder's name or
the one given (``--as``); :mod:`ragstore.ingest.roots` keeps two folders from sharing a prefix.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from pydantic import ValidationError

from ragstore.common.files import entry_problem, file_kind, read_regular
from ragstore.common.jsonl import MAX_LINE_BYTES as MAX_LINE_BYTES  # re-exported: the line limit of every reader
from ragstore.common.jsonl import read_lines
from ragstore.common.problems import describe_validation_error
from ragstore.errors import InvalidInput, NotFound
from ragstore.ingest.chunker import CHARACTERS, HEADING_SEPARATOR, MAX_CHARS, Window, chunk_document, chunk_ids
from ragstore.ingest.document import Document, NotThisKind, Unreadable
from ragstore.ingest.formats import Choice, Readers, gunzip
from ragstore.ingest.formats.text import first_line_title
from ragstore.ingest.records import ChunkRecord, slow_record

if TYPE_CHECKING:
    from ragstore.ingest.fast import RawLine

JSONL_SUFFIXES = (".jsonl", ".ndjson")
PARQUET_SUFFIXES = (".parquet", ".pq")
EMPTY = "empty or whitespace-only document"
NOT_WALKED = "folders not walked"
_TITLE_CHARS = 200
_SNIFF_BYTES = 8192
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$", re.MULTILINE)
_RULE = re.compile(r"^[\W_]+$")
_SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv", ".tox", ".mypy_cache"}


@dataclass(frozen=True)
class Skipped:
    """A file a source did not index, and why (``reason`` is one short phrase).

    ``group`` is set for the files a walk leaves out by rule (no reader for the extension, hidden, not
    text, a folder not walked): the key they are counted under (``.html``, ``hidden``...) in the one line
    that sums them up (:func:`not_read_line`); the others (a bad or empty document, a FIFO, a link) are
    named one by one."""

    path: str
    reason: str
    group: str = ""

    def as_dict(self) -> dict[str, str]:
        """The entry as JSON-able text: bytes of the path that are not UTF-8 appear as ``\\xff`` escapes."""
        return {"path": os.fsencode(self.path).decode("utf-8", "backslashreplace"), "reason": self.reason}


@dataclass
class Source:
    """One input named on the command line: a JSONL file (``kind="jsonl"``), one document (``"document"``)
    or a folder of documents (``"folder"``). ``prefixes`` widen what ``--prune`` may remove.

    ``skipped`` lists, after :meth:`records` ran, the files it did not index and why: empty documents,
    entries that are not regular files (FIFOs, sockets, devices, links to folders), symbolic links that are
    broken, loop or leave the folder, and with ``skip_bad_files`` the files that would otherwise stop the
    run (unreadable, not UTF-8, binary, a path too long for a chunk id).
    """

    label: str
    path: Path | None
    kind: str = "jsonl"
    prefixes: tuple[str, ...] = field(default_factory=tuple)
    #: For a folder or a document: the package prefix its documents are named under (``<prefix>/...``) and
    #: the root that prefix stands for (the folder's resolved path; a document's folder), which
    #: :mod:`ragstore.ingest.roots` registers.
    prefix: str | None = None
    root: str | None = None
    skip_bad_files: bool = False
    skipped: list[Skipped] = field(default_factory=list)
    #: For a Parquet source (``kind="parquet"``): record field -> column name (see ragstore.ingest.columnar).
    columns: dict[str, str] = field(default_factory=dict)
    #: For records a program passes (``kind="records"``, ``path`` None): each one's JSON line, read once by
    #: the one pass of :func:`ragstore.ingest.run.index_sources` as a JSONL file's lines are.
    lines: Iterable[RawLine] | None = None
    #: The readers a folder walk or a document chooses from (:mod:`ragstore.ingest.formats`).
    readers: Readers = field(default_factory=Readers)
    #: How long a document's chunks may be: set by the run from the family's backend
    #: (:func:`ragstore.ingest.chunker.window_for`), characters until then.
    window: Window = CHARACTERS
    #: After :meth:`records` ran: the package_path of every document read whole (empty ones included, bad
    #: files left out), with the name of the reader that read it: the run removes those documents' stored
    #: chunks they no longer hold, and ``ragstore index --json`` lists them.
    documents: dict[str, str] = field(default_factory=dict)

    @property
    def is_folder(self) -> bool:
        return self.kind == "folder"

    def records(self) -> Iterator[tuple[str, ChunkRecord]]:
        if self.kind in ("parquet", "npy", "records"):
            raise InvalidInput(f"{self.label}: a {self.kind} source is read by index_sources (ragstore index)")
        assert self.path is not None
        self.skipped.clear()  # every pass over the source finds the same files again
        self.documents.clear()
        if self.kind == "folder":
            return read_folder(
                self.path,
                window=self.window,
                skipped=self.skipped,
                skip_bad_files=self.skip_bad_files,
                prefix=self.prefix,
                readers=self.readers,
                documents=self.documents,
            )
        if self.kind == "document":
            # One document named on its own is chunked as a folder holding it would chunk it: package_path
            # ``<its folder's name>/<file name>``.
            prefix = self.prefix or Path(os.path.realpath(self.path)).parent.name or "root"
            package = f"{prefix}/{self.path.name}"
            choice = self.readers.choose(self.path.name)
            return _emit_document(
                self.path, package, self.window, self.skipped, self.skip_bad_files, choice, True, self.documents
            )
        return read_jsonl(self.path, label=self.label)


def open_sources(
    arguments: Sequence[str],
    stdin: IO[bytes] | None = None,
    *,
    skip_bad_files: bool = False,
    columns: dict[str, str] | None = None,
    as_: str | None = None,
    readers: Readers | None = None,
) -> list[Source]:
    """Resolve CLI arguments to sources, dispatching on what each one is.

    A folder is walked for documents; a ``.jsonl``/``.ndjson`` file is JSONL; a file one of ``readers``
    reads (:mod:`ragstore.ingest.formats`: the built-in ones and those of the ``ragstore.readers`` entry
    points; InvalidInput when its extra is not installed) is one document, chunked as in a folder (package_path
    ``<its folder's name>/<file name>``); ``as_`` names the prefix of every folder and document instead of
    their folder's name (InvalidInput when it is not one path segment, or when no folder or document is
    given); a
    ``.parquet`` file is read by columns (``columns`` maps record fields to column names), a ``.npy``
    matrix with the JSONL sidecar of the same name (see :mod:`ragstore.ingest.columnar`); ``-``
    is JSONL on standard input, spooled first (see :func:`ragstore.ingest.spool.spool_stdin`) so that the
    input can be validated whole before anything is written, then read again to write it. Anything else
    (another extension, a FIFO, a device) is InvalidInput naming the argument; a missing path NotFound.
    The caller removes a spool with :func:`close_sources`.
    """
    from ragstore.ingest.spool import remove_stale_spools

    if as_ is not None:
        check_prefix_name(as_)
    remove_stale_spools()
    readers = readers or Readers()
    sources: list[Source] = []
    try:
        for argument in arguments:
            source = _open_source(argument, stdin, skip_bad_files, readers)
            if source.kind == "parquet" and columns:
                source.columns = dict(columns)
            if as_ is not None and source.prefix is not None:
                source.prefix = as_
                if source.is_folder:
                    source.prefixes = (f"{as_}/",)
            sources.append(source)
        if as_ is not None and not any(source.prefix is not None for source in sources):
            raise InvalidInput(
                "--as (as_=) names the documents of a folder or of .txt/.md files; JSONL and Parquet records "
                "carry their own chunk_id and package_path"
            )
    except BaseException:
        close_sources(sources)
        raise
    return sources


def check_prefix_name(name: str) -> str:
    """``name`` if it can be a package prefix (one path segment), else InvalidInput saying why."""
    if not name or name in (".", "..") or "/" in name or name != name.strip() or "\x00" in name:
        raise InvalidInput(
            f"--as (as_=) {name!r}: a package prefix is one path segment: not empty, no '/', not '.' or '..', "
            "no spaces around it"
        )
    return name


def _open_source(argument: str, stdin: IO[bytes] | None, skip_bad_files: bool, readers: Readers) -> Source:
    if argument == "-":
        from ragstore.ingest.spool import spool_stdin

        spooled = spool_stdin(stdin or sys.stdin.buffer)
        return Source(label="<stdin>", path=spooled, kind="stdin")
    path = Path(argument)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise NotFound(f"{argument}: no such file or folder") from None
    except OSError as exc:
        raise InvalidInput(f"{argument}: cannot read: {exc.strerror or exc}") from exc
    if stat.S_ISDIR(info.st_mode):
        root = os.path.realpath(path)
        name = Path(root).name or "root"
        return Source(
            label=argument,
            path=path,
            kind="folder",
            prefixes=(f"{name}/",),
            skip_bad_files=skip_bad_files,
            prefix=name,
            root=root,
            readers=readers,
        )
    if not stat.S_ISREG(info.st_mode):
        raise InvalidInput(
            f"{argument}: not a regular file ({file_kind(info.st_mode)}); pipe its content to `ragstore index FAMILY -`"
        )
    suffix = path.suffix.lower()
    if suffix in JSONL_SUFFIXES:
        return Source(label=argument, path=path, kind="jsonl")
    choice = readers.choose(path.name)
    if choice.reader is not None and choice.missing is not None:
        raise InvalidInput(f"{argument}: no reader for {choice.suffix} here: {choice.missing}")
    if choice.reader is not None:
        parent = os.path.dirname(os.path.realpath(path))
        return Source(
            label=argument,
            path=path,
            kind="document",
            skip_bad_files=skip_bad_files,
            prefix=Path(parent).name or "root",
            root=parent,
            readers=readers,
        )
    if suffix in PARQUET_SUFFIXES:
        return Source(label=argument, path=path, kind="parquet")
    if suffix == ".npy":
        sidecar = path.with_suffix(".jsonl")
        if not sidecar.is_file():
            raise NotFound(f"{argument}: its records go in {sidecar} (one JSONL line per row), which is missing")
        return Source(label=argument, path=path, kind="npy")
    raise InvalidInput(
        f"{argument}: unknown kind of source {suffix or '(no extension)'}: give a .jsonl/.ndjson file (JSONL), "
        "a .parquet file, a .npy matrix with its .jsonl sidecar, a document "
        f"({', '.join(readers.names())}), a folder of documents, "
        "or - for JSONL on standard input"
    )


def close_sources(sources: Sequence[Source]) -> None:
    """Remove what :func:`open_sources` spooled (standard input); the files named stay untouched."""
    for source in sources:
        if source.kind == "stdin" and source.path is not None:
            source.path.unlink(missing_ok=True)


def read_jsonl(path: Path, *, label: str | None = None) -> Iterator[tuple[str, ChunkRecord]]:
    """Records of a JSONL file, one per non-blank line."""
    for where, _number, text in read_lines(path, label=label):
        yield where, slow_record(where, text)


class _BadFile(Exception):
    """A file that stops the run unless ``--skip-bad-files``: ``where`` names it (``file`` or ``file:line``),
    ``reason`` the problem."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.reason = reason


class _NotText(_BadFile):
    """A file without an extension that is not UTF-8 text: in a walk, left out as a file with no reader."""


def _reader_for(name: str, readers: Readers) -> Skipped | None:
    """None when a walk reads the file ``name`` (a reader is registered for its extension and can run
    here; a file without an extension is sniffed), else why it does not (with the key it is counted
    under); ``path`` is filled by the caller."""
    choice = readers.choose(name)
    if choice.reader is not None and choice.missing is None:
        return None
    if name.startswith("."):
        return Skipped("", "hidden file", "hidden")
    if choice.missing is not None:
        return Skipped("", choice.missing, f"{choice.suffix} ({choice.missing})")
    return Skipped("", f"no reader for {choice.suffix}", choice.suffix)


def document_files(folder: Path, skipped: list[Skipped] | None = None, readers: Readers | None = None) -> list[Path]:
    """The files under ``folder`` a walk reads, in a stable order: ``.txt``/``.md``/``.markdown``/``.rst``
    documents and files without an extension (read when they are UTF-8 text), skipping VCS folders, venvs
    and caches.

    Only regular files (or symbolic links to regular files inside the folder) are returned; every other
    entry, a link to a folder, a folder not walked, a file with no reader and a folder that cannot be
    listed go to ``skipped`` with the reason. Links to folders are never followed, so a link loop cannot
    make the walk endless. Nothing is opened here.
    """
    found: list[Path] = []
    base = os.path.realpath(folder)
    readers = readers or Readers()

    def skip(item: Skipped) -> None:
        if skipped is not None:
            skipped.append(item)

    def unlistable(exc: OSError) -> None:
        skip(Skipped(str(exc.filename or folder), f"cannot list: {exc.strerror or exc}"))

    for root, dirs, files in os.walk(folder, onerror=unlistable):
        kept = []
        for d in sorted(dirs):
            if d in _SKIP_DIRS or d.startswith("."):
                skip(Skipped(os.path.join(root, d), "folder not walked (hidden, version control or cache)", NOT_WALKED))
                continue
            if os.path.islink(os.path.join(root, d)):
                skip(Skipped(os.path.join(root, d), "symbolic link to a folder (not followed)"))
                continue
            kept.append(d)
        dirs[:] = kept
        for file in sorted(files):
            path = Path(root) / file
            no_reader = _reader_for(file, readers)
            if no_reader is not None:
                skip(Skipped(str(path), no_reader.reason, no_reader.group))
                continue
            problem = entry_problem(path, base)
            if problem is None:
                found.append(path)
            else:
                skip(Skipped(str(path), problem))
    return found


def not_read_line(skipped: Sequence[Skipped], *, every: bool = False) -> str | None:
    """The one line that sums up the files left out by rule (``65 files not read: 36 .html, 27 .gz, 2
    hidden``, then the folders not walked), counts first and keys in order; None when there are none.
    With ``every``, the other entries are counted too, under their reason (``1 a FIFO``)."""
    files = Counter(item.group or item.reason for item in skipped if (item.group or every) and item.group != NOT_WALKED)
    folders = sum(1 for item in skipped if item.group == NOT_WALKED)
    parts = []
    if files:
        total = sum(files.values())
        groups = ", ".join(f"{n} {key}" for key, n in sorted(files.items(), key=lambda kv: (-kv[1], kv[0])))
        parts.append(f"{total} file{'s' if total != 1 else ''} not read: {groups}")
    if folders:
        parts.append(f"{folders} folder{'s' if folders != 1 else ''} not walked (hidden, version control or cache)")
    return "; ".join(parts) or None


def _document(path: Path, choice: Choice) -> Document:
    """The document at ``path`` read by the chosen reader: gunzipped first for ``.gz``; a file without an
    extension has its first bytes looked at before the whole file is read (a large binary is not loaded)."""
    assert choice.reader is not None
    sniff = choice.suffix in ("", ".gz") and choice.reader.name == "text"
    try:
        if sniff and not choice.gzipped and b"\x00" in read_regular(path, _SNIFF_BYTES):
            raise _NotText(str(path), "not text (no extension, NUL bytes): no reader for it")
        data = read_regular(path)
    except OSError as exc:
        raise _BadFile(str(path), f"cannot read: {exc.strerror or exc}") from exc
    try:
        if choice.gzipped:
            data = gunzip(data)
        return choice.reader.read(data, str(path))
    except NotThisKind as exc:
        raise _NotText(str(path), exc.reason) from exc
    except Unreadable as exc:
        where = f"{path}:{exc.line}" if exc.line is not None else str(path)
        raise _BadFile(where, exc.reason) from exc


def document_title(text: str, markdown: bool) -> str:
    """A document's title: its first Markdown heading (for Markdown), else its first line that is not a
    rule or an underline, trimmed to at most 200 characters; ``""`` for a document of rules only."""
    if markdown:
        heading = _HEADING.search(text)
        if heading:
            return heading.group(1).strip()[:_TITLE_CHARS]
    return first_line_title(text)


def document_metadata(package: str, choice: Choice, document: Document) -> dict[str, Any]:
    """What every chunk of a document carries to filter on: the document's own metadata (a Markdown
    file's front matter), then ``path`` (its package_path, with the prefix), ``title``, ``extension``
    (``.md``, ``.pdf.gz``, ``""`` for none), ``format`` and ``reader`` (the reader's name: ``markdown``,
    ``text``, ``rst``, ``html``, ``man``, ``pdf``, ``docx`` or a registered reader's)."""
    assert choice.reader is not None
    return dict(document.metadata) | {
        "path": package,
        "title": document.title,
        "extension": choice.suffix if choice.suffix.startswith(".") else "",
        "format": choice.reader.name,
        "reader": choice.reader.name,
    }


def _document_records(path: Path, package: str, window: Window, choice: Choice) -> list[tuple[str, ChunkRecord]]:
    """Every chunk of one document, built whole first, so that a bad document yields nothing."""
    document = _document(path, choice)
    chunks = chunk_document(document, window, overlap=window.overlap, prefix=window.prefix)
    if not chunks:
        return []
    metadata = document_metadata(package, choice, document)
    records = []
    for n, (chunk, chunk_id) in enumerate(zip(chunks, chunk_ids(package, chunks), strict=True)):
        meta = dict(metadata)
        if chunk.heading:
            meta["heading"] = HEADING_SEPARATOR.join(chunk.heading)
        if chunk.page is not None:
            meta["page"] = chunk.page
        try:
            record = ChunkRecord(chunk_id=chunk_id, package_path=package, text=chunk.text, metadata=meta)
        except ValidationError as exc:
            raise _BadFile(str(path), f"cannot index this document: {describe_validation_error(exc)}") from exc
        records.append((f"{path}#{n}", record))
    return records


def _emit_document(
    path: Path,
    package: str,
    window: Window,
    skipped: list[Skipped] | None,
    skip_bad_files: bool,
    choice: Choice,
    alone: bool = False,
    documents: dict[str, str] | None = None,
) -> Iterator[tuple[str, ChunkRecord]]:
    """The records of one document; ``alone`` (named on its own) makes a file not of its reader's kind
    a bad file, as a walk does not. A document read (empty or not) is added to ``documents`` (its package:
    the reader's name)."""
    try:
        records = _document_records(path, package, window, choice)
    except _NotText as exc:
        if alone:
            raise InvalidInput(f"{exc}") from exc.__cause__
        if skipped is not None:
            skipped.append(Skipped(str(path), exc.reason, choice.suffix or "(no extension)"))
        return
    except _BadFile as exc:
        if not skip_bad_files or skipped is None:
            raise InvalidInput(f"{exc} (--skip-bad-files indexes the other files)") from exc.__cause__
        skipped.append(Skipped(str(path), exc.reason))
        return
    if not records and skipped is not None:
        skipped.append(Skipped(str(path), EMPTY))
    if documents is not None and choice.reader is not None:
        documents[package] = choice.reader.name
    yield from records


def read_folder(
    folder: Path,
    max_chars: int = MAX_CHARS,
    *,
    skipped: list[Skipped] | None = None,
    skip_bad_files: bool = False,
    prefix: str | None = None,
    readers: Readers | None = None,
    window: Window | None = None,
    documents: dict[str, str] | None = None,
) -> Iterator[tuple[str, ChunkRecord]]:
    """Chunks of every document under ``folder``, at most ``window`` long (else ``max_chars`` characters),
    read by ``readers`` (by default the built-in and registered ones); package_path is
    ``<prefix>/<relative path>`` (the prefix being the folder's name unless given) and chunk ids are
    anchored in each chunk's heading path and text (:func:`~ragstore.ingest.chunker.chunk_ids`), so an
    edit changes the ids of the chunks it touches only. Each chunk carries :func:`document_metadata`; the
    package of every document read goes to ``documents``, with its reader's name.

    A bad document (unreadable, not UTF-8, NUL bytes, a path too long for a chunk id) raises InvalidInput
    naming it, or with ``skip_bad_files`` goes to ``skipped`` with the reason, as do empty documents and
    the entries :func:`document_files` does not read. A folder with entries of which no document could be
    read raises InvalidInput saying what it holds (an index of it would hold nothing, and a ``--prune``
    would empty its prefix).
    """
    prefix = prefix or Path(os.path.realpath(folder)).name or "root"
    readers = readers or Readers()
    window = window or Window(max_chars)
    found: list[Skipped] = []
    paths = document_files(folder, found, readers)
    for item in found:
        # A folder or entry that cannot be listed or stat-ed may hide documents (which --prune would then
        # delete): a bad file, like an unreadable document.
        if item.reason.startswith(("cannot list", "cannot stat")) and not (skip_bad_files and skipped is not None):
            raise InvalidInput(f"{item.path}: {item.reason} (--skip-bad-files indexes the other files)")
    mine: list[Skipped] = skipped if skipped is not None else []
    start = len(mine)
    mine.extend(found)
    read = 0
    for path in paths:
        package = f"{prefix}/{path.relative_to(folder).as_posix()}"
        before = len(mine)
        choice = readers.choose(path.name)
        yield from _emit_document(path, package, window, mine, skip_bad_files, choice, False, documents)
        if len(mine) == before or mine[-1].reason == EMPTY:
            read += 1
    left_out = mine[start:]
    if not read and left_out:
        raise InvalidInput(
            f"{folder}: no document read ({not_read_line(left_out, every=True)}); the readers are "
            f"{', '.join(readers.names())} (docs/guide/documents.md)"
        )
