"""The database the benchmarks run on: a server, and a scratch database per measurement.

    with admin_dsn(args.dsn) as admin, scratch_database(admin) as dsn:
        ...

``admin_dsn`` is the given DSN, else ``$RAGSTORE_DSN``, else a throwaway embedded server (stopped and
removed at the end); ``scratch_database`` creates a UTF8 database there, migrates it to head, and drops it afterwards.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from ragstore import migrate
from ragstore.db.server import EmbeddedServer


@contextlib.contextmanager
def admin_dsn(dsn: str | None = None) -> Iterator[str]:
    """A DSN of a server where databases may be created."""
    chosen = dsn or os.environ.get("RAGSTORE_DSN")
    if chosen:
        yield chosen
        return
    home = Path(tempfile.mkdtemp(prefix="ragstore-bench-"))
    server = EmbeddedServer(home)
    try:
        server.ensure_running()
        yield server.dsn("postgres")
    finally:
        server.stop()
        # The cluster's folder holds its WAL (up to max_wal_size, 4 GB): left behind, a few runs fill a disk.
        shutil.rmtree(home, ignore_errors=True)


@contextlib.contextmanager
def scratch_database(admin: str) -> Iterator[str]:
    """A fresh database migrated to head, dropped when the block ends."""
    name = f"ragstore_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE template0").format(sql.Identifier(name)))
    try:
        dsn = make_conninfo(admin, dbname=name)
        migrate.upgrade(dsn)
        yield dsn
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
