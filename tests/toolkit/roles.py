"""Helpers several test modules share (once in integration/test_roles.py)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo


def _login_role(admin_dsn: str, group: str) -> Iterator[str]:
    name = f"rs_{group.split('_')[1]}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(sql.Identifier(name), sql.Identifier(group)))
    try:
        yield name
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            end_sessions(admin, name)
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def end_sessions(admin: psycopg.Connection[Any], name: str) -> None:
    """End the role's sessions and wait until each has exited: a session the test closed may still be
    removing its temporary tables, which the role owns until then (DROP ROLE would refuse)."""
    for _ in range(600):
        admin.execute("SELECT pg_terminate_backend(pid, 100) FROM pg_stat_activity WHERE usename = %s", (name,))
        admin.execute("SELECT pg_stat_clear_snapshot()")  # a transaction otherwise sees its first snapshot
        alive = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = %s", (name,)).fetchone()
        if alive is not None and alive[0] == 0:
            return
        time.sleep(0.05)


@pytest.fixture
def app_dsn(dsn: str) -> Iterator[str]:
    for name in _login_role(dsn, "ragstore_app"):
        yield make_conninfo(dsn, user=name)
