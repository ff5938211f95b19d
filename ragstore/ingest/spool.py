"""Standard input spooled to disk, so that ``ragstore index -`` can validate the input whole, then write it;
and the spool of parsed batches that the one pass of :mod:`ragstore.ingest.fast` keeps for the write pass
(``parsed-<pid>-<random>.bin``), cleaned up the same way.

Spools live in ``<ragstore home>/spool`` (a folder of mode 0700; each file 0600), named
``stdin-<pid>-<random>.jsonl``. The indexer removes its own spool when it ends; a spool whose process died
without that (``kill -9``, power loss) is removed by the next ``ragstore index``, which checks each spool's
process id: a spool is never left behind for longer than until the next run, and never outside the home.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import IO

from ragstore import config
from ragstore.errors import InvalidInput

SPOOL_FOLDER = "spool"
_NAME = re.compile(r"^(?:stdin-(\d+)-.*\.jsonl|parsed-(\d+)-.*\.bin)$")


def spool_dir() -> Path:
    """``<home>/spool``, created private to the user (0700) when missing."""
    folder = config.home_dir() / SPOOL_FOLDER
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    return folder


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # a live process of another user holds that pid
    except OverflowError:
        return False
    return True


def remove_stale_spools() -> list[Path]:
    """Delete the spools whose process is gone; return their paths. Does nothing when there is no spool folder."""
    folder = config.home_dir() / SPOOL_FOLDER
    removed: list[Path] = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        match = _NAME.match(name)
        if match is None or _alive(int(match.group(1) or match.group(2))):
            continue
        path = folder / name
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(path)
    return removed


def spool_stdin(stream: IO[bytes]) -> Path:
    """Copy ``stream`` to a new spool file and return its path; the caller deletes it when done."""
    remove_stale_spools()
    try:
        folder = spool_dir()
        fd, name = tempfile.mkstemp(prefix=f"stdin-{os.getpid()}-", suffix=".jsonl", dir=folder)
    except OSError as exc:
        raise InvalidInput(f"cannot spool standard input in {config.home_dir()}: {exc.strerror or exc}") from exc
    path = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(stream, out, 1024 * 1024)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return path
