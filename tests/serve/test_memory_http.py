# ruff: noqa: F811  (the fixtures imported below are arguments of the tests)
"""Agent memory through the HTTP API: a token of agent A's role recalls and adds A's records only; the
row-level security of ragstore.memory holds through the server as through psql."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import psycopg
import pytest

from tests.toolkit.app import bearer, client_for, token
from tests.toolkit.memory_http import (
    agent_roles,  # noqa: F401  (fixtures)
    record,
)

pytest.importorskip("fastapi")


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
