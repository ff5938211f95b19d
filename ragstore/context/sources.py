"""Reading a pack's inputs from disk: the repo map, L2 files, L5 state and saved packs.

This is the I/O edge of the context package; the builder itself never touches the filesystem.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from pydantic import JsonValue, ValidationError

from ragstore.common.files import entry_problem, read_bytes, read_regular
from ragstore.common.problems import first_problem
from ragstore.common.strictjson import loads_strict
from ragstore.context.builder import BuildError, build_context_pack
from ragstore.context.models import ContextPack, FileEntry, Snippet
from ragstore.errors import InvalidInput, NotFound

__all__ = [
    "SKIP_DIRS",
    "build_from_disk",
    "is_binary",
    "load_pack",
    "read_file_entry",
    "read_state",
    "relative_path",
    "repo_map",
]

# The deepest JSON a state file may hold: far beyond any real debate state, far below the stack's limit.
MAX_STATE_DEPTH = 64

SKIP_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", "__pycache__", ".venv", "venv", ".tox", ".nox", "node_modules",
        ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis",
    }
)  # fmt: skip


def is_binary(path: Path) -> bool:
    """True when the first 8 KiB of the file hold a NUL byte (the test git itself uses). Opened without
    blocking: a FIFO or device raises :class:`~ragstore.common.files.NotRegular` instead of hanging."""
    return b"\x00" in read_regular(path, 8192)


def _listable(path: Path, base: str) -> bool:
    """True for a regular file, or a link to one inside the root; FIFOs, sockets, devices, broken links,
    link loops and links leading outside the root are left out of the map (and never opened)."""
    return entry_problem(path, base) is None


def _git_files(root: Path) -> list[str] | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            check=False,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    names = [os.fsdecode(name) for name in done.stdout.split(b"\x00") if name]
    base = os.path.realpath(root)
    return [name for name in names if _listable(root / name, base)]


def _walk_files(root: Path) -> list[str]:
    found: list[str] = []
    real_root = os.path.realpath(root)
    for current, dirs, names in os.walk(root):  # links to folders are not followed: no cycle
        base = Path(current)
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not (base / d / "pyvenv.cfg").exists())
        for name in names:
            path = base / name
            if not _listable(path, real_root):
                continue
            try:
                binary = is_binary(path)
            except OSError:
                continue  # unreadable, or replaced by a FIFO since the check: not a text file of the repo
            if not binary:
                found.append(path.relative_to(root).as_posix())
    return found


def repo_map(root: str | Path) -> list[str]:
    """Sorted relative POSIX paths of the repository's files.

    In a git work tree: the files git tracks plus untracked ones it does not ignore (``git ls-files
    --cached --others --exclude-standard``), that exist on disk. Elsewhere: a walk that skips ``.git``,
    virtualenvs (any directory holding ``pyvenv.cfg``), caches such as ``__pycache__``, and binary files.
    Either way only regular files (or links to regular files inside ``root``) are listed: FIFOs, sockets,
    devices, broken links, link loops and links leading outside ``root`` are left out, and never opened.
    Raises NotFound when ``root`` is not a directory.
    """
    base = Path(root)
    if not base.is_dir():
        raise NotFound(f"repository directory not found: {base}")
    files = _git_files(base)
    return sorted(set(files if files is not None else _walk_files(base)))


def relative_path(path: str | Path, root: str | Path) -> str:
    """``path`` (absolute, or relative to the working directory) as a POSIX path relative to ``root``.

    Raises InvalidInput when the path lies outside ``root``.
    """
    absolute = Path(os.path.abspath(path))
    base = Path(os.path.abspath(root))
    try:
        return absolute.relative_to(base).as_posix()
    except ValueError as exc:
        raise InvalidInput(f"{path}: outside the root {base}; pass --repo to choose the root") from exc


def read_file_entry(path: str | Path, root: str | Path) -> FileEntry:
    """The L2 entry for a file: its path relative to ``root`` and its text, byte for byte (no newline
    translation). Raises NotFound when missing, InvalidInput when binary, not UTF-8, not a regular file
    (a FIFO is never opened for a blocking read) or a symbolic link leading outside ``root``.
    """
    source = Path(path)
    rel = relative_path(source, root)
    if entry_problem(source, os.path.realpath(root)) == "symbolic link leaving the folder":
        raise InvalidInput(f"{path}: a symbolic link leading outside the root {os.path.abspath(root)}")
    data = read_bytes(source)
    if b"\x00" in data:
        raise InvalidInput(f"{path}: binary file (NUL byte); L2 holds text files only")
    try:
        content = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    return FileEntry(path=rel, content=content)


def read_state(path: str | Path) -> dict[str, JsonValue]:
    """The L5 state from a JSON file holding one object. Raises NotFound or InvalidInput (bad JSON, not an
    object, NaN/Infinity, NUL or lone surrogates, nesting deeper than :data:`MAX_STATE_DEPTH`)."""
    source = Path(path)
    data = loads_strict(read_bytes(source, "state file"), str(source), max_depth=MAX_STATE_DEPTH)
    if not isinstance(data, dict):
        raise InvalidInput(f"{source}: the state must be a JSON object")
    return data


def load_pack(path: str | Path) -> ContextPack:
    """A pack saved as JSON. Raises NotFound when missing, InvalidInput naming the field when invalid."""
    source = Path(path)
    raw = read_bytes(source, "pack file")
    try:
        return ContextPack.model_validate_json(raw)
    except ValidationError as exc:
        problem = first_problem(exc, "pack")
        raise InvalidInput(f"{source}: not a context pack: {problem.field}: {problem.message}") from exc


def build_from_disk(
    *,
    brief: str,
    root: str | Path,
    max_tokens: int,
    map_repo: bool = False,
    files: tuple[str, ...] = (),
    summaries: tuple[str, ...] = (),
    constraints: tuple[str, ...] = (),
    artifacts: tuple[str, ...] = (),
    state_path: str | Path | None = None,
    snippets: list[Snippet] | None = None,
    extra_state: dict[str, Any] | None = None,
) -> ContextPack:
    """Read the inputs (L1 from ``root`` when ``map_repo``, L2 ``files``, L5 from ``state_path``) and build.

    Paths in the pack are relative to ``root``. Raises NotFound for a missing file, InvalidInput for an
    unreadable one or when the builder rejects the input (the message names every bad field).
    ``extra_state`` is merged over the state file's top-level keys (agent memory puts ``memory`` there).
    """
    spec: dict[str, object] = {
        "brief": brief,
        "repo_map": repo_map(root) if map_repo else [],
        "files": [read_file_entry(path, root) for path in files],
        "snippets": snippets or [],
        "summaries": list(summaries),
        "constraints": list(constraints),
        "artifacts": list(artifacts),
        "state": (read_state(state_path) if state_path is not None else {}) | (extra_state or {}),
        "max_tokens": max_tokens,
    }
    result = build_context_pack(spec)
    if isinstance(result, BuildError):
        raise InvalidInput(result.message())
    return result.pack
