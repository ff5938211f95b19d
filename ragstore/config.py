"""Settings read from the environment (flags override them in the CLI).

- ``RAGSTORE_DSN``: a Postgres to use. Without it, ragstore runs its embedded server.
- ``RAGSTORE_HOME``: where the embedded server keeps its data (default: a per-user data dir).
- ``RAGSTORE_STATEMENT_TIMEOUT``: a ``statement_timeout`` for every session, e.g. ``30s`` (default none).
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

DSN_ENV = "RAGSTORE_DSN"
HOME_ENV = "RAGSTORE_HOME"
# Read and checked in one place: :func:`ragstore.db.connection.statement_timeout`.
TIMEOUT_ENV = "RAGSTORE_STATEMENT_TIMEOUT"


def home_dir() -> Path:
    """The folder of ragstore's own state: ``$RAGSTORE_HOME`` or the per-user data dir."""
    env = os.environ.get(HOME_ENV)
    if env:
        return Path(env).expanduser().resolve()
    return Path(platformdirs.user_data_dir("ragstore")).resolve()


def dsn_from_env() -> str | None:
    """``$RAGSTORE_DSN`` when set and not blank."""
    value = os.environ.get(DSN_ENV, "").strip()
    return value or None
