"""The embedded PostgreSQL for library users, started explicitly.

``ragstore.embedded.start()`` starts (or reuses) the server under ``$RAGSTORE_HOME`` (else the per-user
data folder) and returns its DSN; ``ragstore.Store.embedded()`` does the same and opens a Store on it.
The command line starts it on demand; a library call never does behind the caller's back.
"""

from __future__ import annotations

from pathlib import Path

from ragstore import config


def start(home: str | Path | None = None) -> str:
    """Start the embedded server in ``home`` (default: ``$RAGSTORE_HOME`` or the per-user data folder)
    unless it runs already, and return its DSN."""
    from ragstore.db.server import EmbeddedServer

    return EmbeddedServer(Path(home) if home is not None else config.home_dir()).ensure_running()


def stop(home: str | Path | None = None) -> bool:
    """Stop the embedded server in ``home`` (fast shutdown; the data is kept); False if it was not running."""
    from ragstore.db.server import EmbeddedServer

    return EmbeddedServer(Path(home) if home is not None else config.home_dir()).stop()
