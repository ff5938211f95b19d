"""Helpers several test modules share (once in serve/test_memory_http.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from ragstore.memory import grant_agent


def record(id_: str, agent: str, content: str) -> dict[str, object]:
    return {"id": id_, "agent": agent, "store": "semantic", "at": "2026-06-01T00:00:00Z", "content": content}


@pytest.fixture
def agent_roles(dsn: str) -> Iterator[tuple[str, str]]:
    """Two NOLOGIN members of ragstore_app, bound to agents ``ana`` and ``bob``."""
    names = (f"rs_ana_{uuid.uuid4().hex[:8]}", f"rs_bob_{uuid.uuid4().hex[:8]}")
    with psycopg.connect(dsn, autocommit=True) as admin:
        for name in names:
            admin.execute(sql.SQL("CREATE ROLE {} NOLOGIN IN ROLE ragstore_app").format(sql.Identifier(name)))
    with psycopg.connect(dsn) as conn:
        grant_agent(conn, "ana", names[0])
        grant_agent(conn, "bob", names[1])
        conn.commit()
    yield names
    with psycopg.connect(dsn, autocommit=True) as admin:
        for name in names:
            admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))
