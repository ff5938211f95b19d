"""Reading files named by a user or found in a walk without trusting them.

Nothing here opens a path before ``lstat``/``stat`` said what it is, and what it opens is opened
non-blocking and checked again with ``fstat``: a FIFO, a socket or a device can never block a read, a
symbolic link loop or a broken link is named as such, and a link whose target lies outside a given root is
reported rather than followed. :func:`read_bytes` is the one reader of an input file named on the command
line or in a call.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ragstore.errors import InvalidInput, NotFound

__all__ = ["NotRegular", "entry_problem", "file_kind", "inside", "read_bytes", "read_regular"]


class NotRegular(OSError):
    """The path names something other than a regular file (``kind`` says what)."""

    def __init__(self, kind: str) -> None:
        super().__init__(errno.EINVAL, f"not a regular file ({kind})")
        self.kind = kind


def file_kind(mode: int) -> str:
    """What a non-regular ``st_mode`` is, in a few words (``a FIFO``, ``a socket``, ``a device``…)."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def inside(path: str, base: str) -> bool:
    """True when the real path ``path`` is ``base`` or lies under it."""
    return path == base or path.startswith(base.rstrip(os.sep) + os.sep)


def entry_problem(path: Path, base: str) -> str | None:
    """Why a walk should not read ``path`` (a name under the folder whose real path is ``base``), or None
    for a regular file or a symbolic link to one inside ``base``.

    Only ``lstat``/``stat`` are called: nothing is opened, so a FIFO or a device cannot block the walk.
    """
    try:
        info = os.lstat(path)
    except OSError as exc:
        return f"cannot stat: {exc.strerror or exc}"
    if stat.S_ISLNK(info.st_mode):
        try:
            target = os.path.realpath(path, strict=True)
        except (OSError, RuntimeError) as exc:
            if (isinstance(exc, OSError) and exc.errno == errno.ELOOP) or isinstance(exc, RuntimeError):
                return "symbolic link loop"
            return "broken symbolic link"
        if not inside(target, base):
            return "symbolic link leaving the folder"
        try:
            info = os.stat(path)
        except OSError as exc:
            return f"cannot stat: {exc.strerror or exc}"
    if not stat.S_ISREG(info.st_mode):
        return file_kind(info.st_mode)
    return None


def read_regular(path: str | Path, limit: int | None = None) -> bytes:
    """The bytes of ``path`` (the first ``limit`` of them when given) if it is a regular file, or a link to
    one; :class:`NotRegular` for anything else, OSError when it cannot be read. Never blocks: the file is
    opened non-blocking (so a FIFO put in its place since a check cannot hang the open) and ``fstat``-ed
    before any read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegular(file_kind(info.st_mode))
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read() if limit is None else handle.read(limit)
    finally:
        os.close(fd)


def read_bytes(path: str | Path, what: str = "file", limit: int | None = None) -> bytes:
    """The bytes of ``path`` (the first ``limit`` of them when given); NotFound ``"<what> not found:
    <path>"`` when it is missing or a folder, InvalidInput when it is not a regular file (refused before
    any blocking read) or cannot be read."""
    source = Path(path)
    try:
        return read_regular(source, limit)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
        raise NotFound(f"{what} not found: {path}") from exc
    except NotRegular as exc:
        if exc.kind == "a folder":
            raise NotFound(f"{what} not found: {path} is a folder") from exc
        raise InvalidInput(f"{path}: not a regular file ({exc.kind})") from exc
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot read: {exc.strerror or exc}") from exc
