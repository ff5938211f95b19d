"""The two migration chains the baseline replaced, frozen in ``tests/data`` (each with a README.md): a test
builds a database at one of their revisions with them, as a user of an older ragstore has it.

- ``chain_0022``: revisions 0001 to 0022 (the first squash replaced them);
- ``chain_0005``: revisions 0001_baseline to 0005_sync_status (the second), self-contained: its env.py and
  revisions read the schema.sql and function files of 0005_sync_status, frozen beside them.
"""

from __future__ import annotations

import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from alembic import command
from alembic.config import Config

DATA = Path(__file__).resolve().parents[1] / "data"
# The helper modules the chains' revisions import, put on sys.path while a test uses them.
HELPERS = ("chain_0022_frozen", "chain_0005_schema")


def _unpack(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    with tarfile.open(DATA / f"{name}.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    root = tmp_path / name
    monkeypatch.syspath_prepend(str(root))
    yield root
    for helper in HELPERS:  # the next test's copy is somewhere else
        sys.modules.pop(helper, None)


@pytest.fixture
def chain_0022(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The revisions 0001-0022, unpacked (their helper module importable)."""
    yield from _unpack("chain_0022", tmp_path, monkeypatch)


@pytest.fixture
def chain_0005(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The revisions 0001_baseline-0005_sync_status, unpacked (their frozen schema module importable)."""
    yield from _unpack("chain_0005", tmp_path, monkeypatch)


def _config(chain: Path, dsn: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(chain))
    cfg.attributes["connection_factory"] = lambda: psycopg.connect(dsn)
    return cfg


def old_upgrade(chain: Path, dsn: str, revision: str) -> None:
    """Migrate ``dsn`` to ``revision`` with the frozen ``chain``, as that ragstore's ``migrate`` did."""
    cfg = _config(chain, dsn)
    cfg.attributes["upgrading"] = True  # chain_0005's env.py builds an empty database only when told so
    command.upgrade(cfg, revision)


def old_downgrade(chain: Path, dsn: str, revision: str) -> None:
    """Migrate ``dsn`` down to ``revision`` with the frozen ``chain`` (its revisions' own downgrades)."""
    command.downgrade(_config(chain, dsn), revision)
