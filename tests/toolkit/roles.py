"""Helpers several test modules share (once in integration/test_roles.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

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
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,))
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


@pytest.fixture
def app_dsn(dsn: str) -> Iterator[str]:
    for name in _login_role(dsn, "ragstore_app"):
        yield make_conninfo(dsn, user=name)
