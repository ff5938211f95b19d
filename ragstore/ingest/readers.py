"""Where chunk records come from: chunks.jsonl files, .txt/.md documents, folders of them, or JSONL on stdin.

Every reader yields ``(where, record)`` pairs, ``where`` being ``file:line`` (or ``file#n`` for a
document's n-th chunk), and raises :class:`ragstore.errors.InvalidInput` naming the file, the line and the
field of the first bad record.

A folder walk never opens anything but regular files: FIFOs, sockets, devices, links to folders and
symbolic links that are broken, loop or lead outside the folder are skipped and reported (``Source.skipped``),
so a hostile tree can neither hang the walk nor make it read files outside the folder.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

from pydantic import ValidationError

from ragstore.common.files import entry_problem, file_kind, read_regular
from ragstore.common.jsonl import MAX_LINE_BYTES as MAX_LINE_BYTES  # re-exported: the line limit of every reader
from ragstore.common.jsonl import read_lines
from ragstore.common.problems import describe_validation_error
from ragstore.errors import InvalidInput, NotFound
from ragstore.ingest.chunker import MAX_CHARS, chunk_text
from ragstore.ingest.records import ChunkRecord, slow_record

if TYPE_CHECKING:
    from ragstore.ingest.fast import RawLine

DOCUMENT_SUFFIXES = (".txt", ".md", ".markdown")
JSONL_SUFFIXES = (".jsonl", ".ndjson")
PARQUET_SUFFIXES = (".parquet", ".pq")
EMPTY = "empty or whitespace-only document"
_SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv", ".tox", ".mypy_cache"}


@dataclass(frozen=True)
class Skipped:
    """A file a source did not index, and why (``reason`` is one short phrase)."""

    path: str
    reason: str

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
    skip_bad_files: bool = False
    skipped: list[Skipped] = field(default_factory=list)
    #: For a Parquet source (``kind="parquet"``): record field -> column name (see ragstore.ingest.columnar).
    columns: dict[str, str] = field(default_factory=dict)
    #: For records a program passes (``kind="records"``, ``path`` None): each one's JSON line, read once by
    #: the one pass of :func:`ragstore.ingest.run.index_sources` as a JSONL file's lines are.
    lines: Iterable[RawLine] | None = None

    @property
    def is_folder(self) -> bool:
        return self.kind == "folder"

    def records(self) -> Iterator[tuple[str, ChunkRecord]]:
        if self.kind in ("parquet", "npy", "records"):
            raise InvalidInput(f"{self.label}: a {self.kind} source is read by index_sources (ragstore index)")
        assert self.path is not None
        self.skipped.clear()  # every pass over the source finds the same files again
        if self.kind == "folder":
            return read_folder(self.path, skipped=self.skipped, skip_bad_files=self.skip_bad_files)
        if self.kind == "document":
            # One document named on its own is chunked as a folder holding it would chunk it: package_path
            # ``<its folder's name>/<file name>``.
            parent = Path(os.path.realpath(self.path)).parent.name or "root"
            package = f"{parent}/{self.path.name}"
            return _emit_document(self.path, package, MAX_CHARS, self.skipped, self.skip_bad_files)
        return read_jsonl(self.path, label=self.label)


def open_sources(
    arguments: Sequence[str],
    stdin: IO[bytes] | None = None,
    *,
    skip_bad_files: bool = False,
    columns: dict[str, str] | None = None,
) -> list[Source]:
    """Resolve CLI arguments to sources, dispatching on what each one is.

    A folder is walked for documents; a ``.jsonl``/``.ndjson`` file is JSONL; a ``.txt``/``.md``/``.markdown``
    file is one document, chunked as in a folder (package_path ``<its folder's name>/<file name>``); a
    ``.parquet`` file is read by columns (``columns`` maps record fields to column names), a ``.npy``
    matrix with the JSONL sidecar of the same name (see :mod:`ragstore.ingest.columnar`); ``-``
    is JSONL on standard input, spooled first (see :func:`ragstore.ingest.spool.spool_stdin`) so that the
    input can be validated whole before anything is written, then read again to write it. Anything else
    (another extension, a FIFO, a device) is InvalidInput naming the argument; a missing path NotFound.
    The caller removes a spool with :func:`close_sources`.
    """
    from ragstore.ingest.spool import remove_stale_spools

    remove_stale_spools()
    sources: list[Source] = []
    try:
        for argument in arguments:
            source = _open_source(argument, stdin, skip_bad_files)
            if source.kind == "parquet" and columns:
                source.columns = dict(columns)
            sources.append(source)
    except BaseException:
        close_sources(sources)
        raise
    return sources


def _open_source(argument: str, stdin: IO[bytes] | None, skip_bad_files: bool) -> Source:
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
        name = path.resolve().name or "root"
        return Source(label=argument, path=path, kind="folder", prefixes=(f"{name}/",), skip_bad_files=skip_bad_files)
    if not stat.S_ISREG(info.st_mode):
        raise InvalidInput(
            f"{argument}: not a regular file ({file_kind(info.st_mode)}); pipe its content to `ragstore index FAMILY -`"
        )
    suffix = path.suffix.lower()
    if suffix in JSONL_SUFFIXES:
        return Source(label=argument, path=path, kind="jsonl")
    if suffix in DOCUMENT_SUFFIXES:
        return Source(label=argument, path=path, kind="document", skip_bad_files=skip_bad_files)
    if suffix in PARQUET_SUFFIXES:
        return Source(label=argument, path=path, kind="parquet")
    if suffix == ".npy":
        sidecar = path.with_suffix(".jsonl")
        if not sidecar.is_file():
            raise NotFound(f"{argument}: its records go in {sidecar} (one JSONL line per row), which is missing")
        return Source(label=argument, path=path, kind="npy")
    raise InvalidInput(
        f"{argument}: unknown kind of source {suffix or '(no extension)'}: give a .jsonl/.ndjson file (JSONL), "
        "a .parquet file, a .npy matrix with its .jsonl sidecar, a .txt/.md document, a folder of documents, "
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


def document_files(folder: Path, skipped: list[Skipped] | None = None) -> list[Path]:
    """The .txt/.md files under ``folder`` in a stable order, skipping VCS folders, venvs and caches.

    Only regular files (or symbolic links to regular files inside the folder) are returned; every other
    document-named entry, a link to a folder and a folder that cannot be listed go to ``skipped`` with the
    reason. Links to folders are never followed, so a link loop cannot make the walk endless.
    """
    found: list[Path] = []
    base = os.path.realpath(folder)

    def unlistable(exc: OSError) -> None:
        if skipped is not None:
            skipped.append(Skipped(str(exc.filename or folder), f"cannot list: {exc.strerror or exc}"))

    for root, dirs, files in os.walk(folder, onerror=unlistable):
        kept = []
        for d in sorted(dirs):
            if d in _SKIP_DIRS or d.startswith("."):
                continue
            if os.path.islink(os.path.join(root, d)):
                if skipped is not None:
                    skipped.append(Skipped(os.path.join(root, d), "symbolic link to a folder (not followed)"))
                continue
            kept.append(d)
        dirs[:] = kept
        for file in sorted(files):
            if not file.lower().endswith(DOCUMENT_SUFFIXES):
                continue
            path = Path(root) / file
            problem = entry_problem(path, base)
            if problem is None:
                found.append(path)
            elif skipped is not None:
                skipped.append(Skipped(str(path), problem))
    return found


def _document_text(path: Path) -> str:
    try:
        data = read_regular(path)
    except OSError as exc:
        raise _BadFile(str(path), f"cannot read: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise _BadFile(f"{path}:{line}", f"invalid UTF-8 at byte {exc.start}") from exc
    if "\x00" in text:
        raise _BadFile(str(path), "contains NUL bytes (a binary file?)")
    return text


def _document_records(path: Path, package: str, max_chars: int) -> list[tuple[str, ChunkRecord]]:
    """Every chunk of one document, built whole first, so that a bad document yields nothing."""
    text = _document_text(path)
    records = []
    for n, piece in enumerate(chunk_text(text, max_chars)):
        try:
            record = ChunkRecord(chunk_id=f"{package}#{n}", package_path=package, text=piece)
        except ValidationError as exc:
            raise _BadFile(str(path), f"cannot index this document: {describe_validation_error(exc)}") from exc
        records.append((f"{path}#{n}", record))
    return records


def _emit_document(
    path: Path, package: str, max_chars: int, skipped: list[Skipped] | None, skip_bad_files: bool
) -> Iterator[tuple[str, ChunkRecord]]:
    try:
        records = _document_records(path, package, max_chars)
    except _BadFile as exc:
        if not skip_bad_files or skipped is None:
            raise InvalidInput(f"{exc} (--skip-bad-files indexes the other files)") from exc.__cause__
        skipped.append(Skipped(str(path), exc.reason))
        return
    if not records and skipped is not None:
        skipped.append(Skipped(str(path), EMPTY))
    yield from records


def read_folder(
    folder: Path,
    max_chars: int = MAX_CHARS,
    *,
    skipped: list[Skipped] | None = None,
    skip_bad_files: bool = False,
) -> Iterator[tuple[str, ChunkRecord]]:
    """Chunks of every document under ``folder``; package_path is ``<folder name>/<relative path>`` and
    chunk ids are ``<package_path>#<n>``, stable as long as the document is unchanged.

    A bad document (unreadable, not UTF-8, NUL bytes, a path too long for a chunk id) raises InvalidInput
    naming it, or with ``skip_bad_files`` goes to ``skipped`` with the reason, as do empty documents and
    the entries :func:`document_files` does not read.
    """
    prefix = Path(os.path.realpath(folder)).name or "root"
    found: list[Skipped] = []
    paths = document_files(folder, found)
    for item in found:
        # A folder or entry that cannot be listed or stat-ed may hide documents (which --prune would then
        # delete): a bad file, like an unreadable document.
        if item.reason.startswith(("cannot list", "cannot stat")) and not (skip_bad_files and skipped is not None):
            raise InvalidInput(f"{item.path}: {item.reason} (--skip-bad-files indexes the other files)")
    if skipped is not None:
        skipped.extend(found)
    for path in paths:
        package = f"{prefix}/{path.relative_to(folder).as_posix()}"
        yield from _emit_document(path, package, max_chars, skipped, skip_bad_files)
