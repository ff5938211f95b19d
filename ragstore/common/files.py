"""Reading an input file named on the command line or in a call."""

from __future__ import annotations

from pathlib import Path

from ragstore.errors import InvalidInput, NotFound

__all__ = ["read_bytes"]


def read_bytes(path: str | Path, what: str = "file") -> bytes:
    """The bytes of ``path``; NotFound ``"<what> not found: <path>"`` when it is missing or a folder,
    InvalidInput when it cannot be read (permissions, I/O)."""
    source = Path(path)
    try:
        return source.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
        raise NotFound(f"{what} not found: {path}") from exc
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot read: {exc.strerror}") from exc
