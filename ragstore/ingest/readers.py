"""Where chunk records come from: chunks.jsonl files, folders of .txt/.md documents, or JSONL on stdin.

Every reader yields ``(where, record)`` pairs, ``where`` being ``file:line`` (or ``file#n`` for a
document's n-th chunk), and raises :class:`ragstore.errors.InvalidInput` naming the file, the line and the
field of the first bad record.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from pydantic import ValidationError

from ragstore.common.jsonl import MAX_LINE_BYTES as MAX_LINE_BYTES  # re-exported: the line limit of every reader
from ragstore.common.jsonl import read_lines
from ragstore.errors import InvalidInput, NotFound
from ragstore.ingest.chunker import MAX_CHARS, chunk_text
from ragstore.ingest.records import ChunkRecord

DOCUMENT_SUFFIXES = (".txt", ".md", ".markdown")
_SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv", ".tox", ".mypy_cache"}


def describe_validation_error(exc: ValidationError) -> str:
    """One line: the first error's field path and message (``vector.3: Input should be a valid number``)."""
    first = exc.errors(include_url=False)[0]
    loc = ".".join(str(part) for part in first.get("loc", ())) or "record"
    message = str(first.get("msg", "invalid"))
    extra = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{loc}: {message}{extra}"


@dataclass
class Source:
    """One input named on the command line. ``prefixes`` widen what ``--prune`` may remove."""

    label: str
    path: Path | None
    is_folder: bool = False
    prefixes: tuple[str, ...] = field(default_factory=tuple)

    def records(self) -> Iterator[tuple[str, ChunkRecord]]:
        if self.is_folder:
            assert self.path is not None
            return read_folder(self.path)
        assert self.path is not None
        return read_jsonl(self.path, label=self.label)


def open_sources(arguments: Sequence[str], stdin: IO[bytes] | None = None) -> list[Source]:
    """Resolve CLI arguments to sources. ``-`` spools standard input to a temporary file first, so that
    the input can be validated whole before anything is written, then read again to write it."""
    sources: list[Source] = []
    for argument in arguments:
        if argument == "-":
            spool = tempfile.NamedTemporaryFile(prefix="ragstore-stdin-", suffix=".jsonl", delete=False)
            with spool:
                shutil.copyfileobj(stdin or sys.stdin.buffer, spool, 1024 * 1024)
            sources.append(Source(label="<stdin>", path=Path(spool.name)))
            continue
        path = Path(argument)
        if path.is_dir():
            name = path.resolve().name or "root"
            sources.append(Source(label=argument, path=path, is_folder=True, prefixes=(f"{name}/",)))
        elif path.exists():
            sources.append(Source(label=argument, path=path))
        else:
            raise NotFound(f"{argument}: no such file or folder")
    return sources


def read_jsonl(path: Path, *, label: str | None = None) -> Iterator[tuple[str, ChunkRecord]]:
    """Records of a JSONL file, one per non-blank line."""
    for where, _number, text in read_lines(path, label=label):
        try:
            record = ChunkRecord.model_validate_json(text)
        except ValidationError as exc:
            kinds = {e["type"] for e in exc.errors()}
            if kinds & {"json_invalid", "json_type", "model_type"}:
                raise InvalidInput(f"{where}: not a JSON object: {describe_validation_error(exc)}") from exc
            raise InvalidInput(f"{where}: {describe_validation_error(exc)}") from exc
        yield where, record


def document_files(folder: Path) -> list[Path]:
    """The .txt/.md files under ``folder`` in a stable order, skipping VCS folders, venvs and caches."""
    found: list[Path] = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for file in sorted(files):
            if file.lower().endswith(DOCUMENT_SUFFIXES):
                found.append(Path(root) / file)
    return found


def read_folder(folder: Path, max_chars: int = MAX_CHARS) -> Iterator[tuple[str, ChunkRecord]]:
    """Chunks of every document under ``folder``; package_path is ``<folder name>/<relative path>`` and
    chunk ids are ``<package_path>#<n>``, stable as long as the document is unchanged."""
    base = folder.resolve()
    prefix = base.name or "root"
    for path in document_files(folder):
        package = f"{prefix}/{path.resolve().relative_to(base).as_posix()}"
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InvalidInput(f"{path}: cannot read: {exc.strerror}") from exc
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line = data[: exc.start].count(b"\n") + 1
            raise InvalidInput(f"{path}:{line}: invalid UTF-8 at byte {exc.start}") from exc
        if "\x00" in text:
            raise InvalidInput(f"{path}: contains NUL bytes (a binary file?)")
        for n, piece in enumerate(chunk_text(text, max_chars)):
            yield f"{path}#{n}", ChunkRecord(chunk_id=f"{package}#{n}", package_path=package, text=piece)
