"""Agent memory through the HTTP API: a token of agent A's role recalls and adds A's records only; the
row-level security of ragstore.memory holds through the server as through psql."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import psycopg
import pytest
from psycopg import sql

from ragstore.memory import grant_agent
from tests.serve.test_app import bearer, client_for, token

pytest.importorskip("fastapi")


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


@pytest.fixture
async def client(dsn: str) -> AsyncIterator[httpx.AsyncClient]:
    async for c in client_for(dsn):
        yield c


async def test_agent_a_cannot_recall_or_add_to_agent_bs_memory(
    client: httpx.AsyncClient, dsn: str, agent_roles: tuple[str, str]
) -> None:
    ana = bearer(token(dsn, agent_roles[0], "ana"))
    bob = bearer(token(dsn, agent_roles[1], "bob"))
    added = await client.post(
        "/v1/memory/bob/records", json={"records": [record("b1", "bob", "bob's vault code")]}, headers=bob
    )
    assert added.status_code == 200 and added.json()["added"] == 1, added.text
    mine = await client.post(
        "/v1/memory/ana/records", json={"records": [record("a1", "ana", "ana's plan")]}, headers=ana
    )
    assert mine.status_code == 200 and mine.json()["added"] == 1
    body = {"stores": ["semantic"], "query": "vault code", "k": 5}
    own = await client.post("/v1/memory/bob/recall", json=body, headers=bob)
    assert own.status_code == 200 and "bob's vault code" in own.text and own.json()["hits"]
    theirs = await client.post("/v1/memory/bob/recall", json=body, headers=ana)
    assert theirs.status_code in (200, 403), theirs.text
    assert "bob's vault" not in theirs.text
    assert theirs.status_code == 403 or theirs.json()["hits"] == []
    forged = await client.post(
        "/v1/memory/bob/records", json={"records": [record("b2", "bob", "planted")]}, headers=ana
    )
    assert forged.status_code == 403, forged.text
    mismatch = await client.post("/v1/memory/ana/records", json={"records": [record("x", "bob", "x")]}, headers=ana)
    assert mismatch.status_code == 400 and "agent" in mismatch.json()["error"]
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT agent, id FROM ragstore.memory ORDER BY agent, id").fetchall()
    assert rows == [("ana", "a1"), ("bob", "b1")]
