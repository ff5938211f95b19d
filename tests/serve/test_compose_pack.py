# ruff: noqa: F811 (the fixtures imported from the neighbouring tests)
"""Memory composition, context packs and the second-stage search options through the HTTP API (httpx to
uvicorn on 127.0.0.1): each answer equals the library's for the same inputs, and an agent's token
composes, or packs, its own memory only."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from ragstore import Store
from ragstore.context import pack_bytes, render_markdown, shed
from ragstore.memory import AgentProfile
from ragstore.search.hyde import Hyde
from ragstore.search.rerank import HttpReranker
from tests.rerank_stub import RerankStub
from tests.toolkit.app import bearer, client_for, seeded, token  # noqa: F401 (the fixture)
from tests.toolkit.memory_http import agent_roles, record  # noqa: F401 (the fixture)


@pytest.fixture
async def client(seeded: str) -> AsyncIterator[httpx.AsyncClient]:
    async for c in client_for(seeded):
        yield c


@pytest.fixture
def memories(seeded: str, agent_roles: tuple[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Tokens of ana and bob, each with two semantic records of its own."""
    ana, bob = bearer(token(seeded, agent_roles[0], "ana")), bearer(token(seeded, agent_roles[1], "bob"))
    with Store(seeded, pool_size=1) as store:
        store.memory.add(
            [
                record("a1", "ana", "ana's plan: ship the parser"),
                record("a2", "ana", "ana prefers short answers"),
                record("b1", "bob", "bob's vault code is 4711"),
                record("b2", "bob", "bob's deploy checklist"),
            ]
        )
    return ana, bob


def library_compose(dsn: str, agent: str, stores: list[str], task_hint: str | None = None) -> Any:
    with Store(dsn, pool_size=1) as store:
        return store.memory.compose(AgentProfile(agent=agent, stores=stores), task_hint=task_hint)


async def test_compose_gives_the_librarys_bundle_and_only_the_callers_agent(
    client: httpx.AsyncClient, seeded: str, memories: tuple[dict[str, str], dict[str, str]]
) -> None:
    ana, bob = memories
    answer = await client.post("/v1/memory/bob/compose", json={"stores": ["semantic"]}, headers=bob)
    assert answer.status_code == 200, answer.text
    bundle = library_compose(seeded, "bob", ["semantic"])
    assert answer.json() == {**bundle.to_dict(), "bundle_id": bundle.bundle_id}
    assert [r["id"] for r in answer.json()["stores"]["semantic"]] == ["b1", "b2"]  # the same instant: by id
    markdown = await client.post(
        "/v1/memory/bob/compose", json={"stores": ["semantic"], "format": "markdown"}, headers=bob
    )
    assert markdown.json() == {"agent": "bob", "bundle_id": bundle.bundle_id, "markdown": bundle.to_markdown()}
    theirs = await client.post("/v1/memory/bob/compose", json={"stores": ["semantic"]}, headers=ana)
    assert theirs.status_code in (200, 403), theirs.text
    assert "vault" not in theirs.text and "checklist" not in theirs.text
    assert theirs.status_code == 403 or theirs.json()["stores"]["semantic"] == []
    bad = await client.post("/v1/memory/bob/compose", json={"stores": ["dreams"]}, headers=bob)
    assert bad.status_code == 400 and "stores" in bad.json()["error"]
    evil = await client.post("/v1/memory/bob' OR '1'='1/compose", json={"stores": ["semantic"]}, headers=bob)
    assert evil.status_code == 400 and "agent" in evil.json()["error"]


async def test_the_context_pack_is_the_librarys_for_the_same_inputs(client: httpx.AsyncClient, seeded: str) -> None:
    reader = bearer(token(seeded, "ragstore_reader"))
    body = {
        "brief": "Explain how files are copied",
        "max_tokens": 4000,
        "retrieve": {"family": "docs", "query": "copies files to topic 3", "k": 4},
        "summaries": ["the user knows the basics"],
        "constraints": ["cite every chunk"],
    }
    answer = await client.post("/v1/context-pack", json=body, headers=reader)
    assert answer.status_code == 200, answer.text
    with Store(seeded, pool_size=1) as store:
        pack = store.context_pack(
            brief="Explain how files are copied",
            max_tokens=4000,
            family="docs",
            query="copies files to topic 3",
            k=4,
            mode="hybrid",
            summaries=["the user knows the basics"],
            constraints=["cite every chunk"],
        )
    assert answer.json() == {"pack": json.loads(pack_bytes(pack)), "markdown": None}
    assert len(answer.json()["pack"]["layers"]["L3"]) == 4

    tight = {**body, "max_tokens": 40, "shed": "layers", "format": "markdown"}
    shed_answer = await client.post("/v1/context-pack", json=tight, headers=reader)
    assert shed_answer.status_code == 200, shed_answer.text
    expected = shed(pack.model_copy(update={}), 40)
    assert shed_answer.json()["pack"]["shed"] == json.loads(pack_bytes(expected))["shed"]
    assert shed_answer.json()["markdown"] == render_markdown(expected)

    for bad, field in (
        ({**body, "retrieve": {**body["retrieve"], "family": "nosuch"}}, "nosuch"),
        ({**body, "files": ["/etc/passwd"]}, "files"),
        ({**body, "max_tokens": 0}, "max_tokens"),
        ({**body, "retrieve": {**body["retrieve"], "family": "docs'; DROP TABLE ragstore.chunks; --"}}, "DROP"),
        ({**body, "memory": {"agent": "x'); DELETE FROM ragstore.memory; --", "stores": ["semantic"]}}, "agent"),
    ):
        refused = await client.post("/v1/context-pack", json=bad, headers=reader)
        assert refused.status_code in (400, 404) and field in refused.json()["error"], refused.text
    with Store(seeded, pool_size=1) as store:
        assert store.family_stats("docs").rows == 24  # nothing reached SQL as a statement


async def test_a_context_pack_holds_the_callers_memory_and_never_anothers(
    client: httpx.AsyncClient, seeded: str, memories: tuple[dict[str, str], dict[str, str]]
) -> None:
    ana, _ = memories
    own = {"brief": "plan the day", "max_tokens": 4000, "memory": {"agent": "ana", "stores": ["semantic"]}}
    answer = await client.post("/v1/context-pack", json=own, headers=ana)
    assert answer.status_code == 200, answer.text
    layers = answer.json()["pack"]["layers"]
    assert any("ana's plan" in line for line in layers["L4"])
    bundle = library_compose(seeded, "ana", ["semantic"])
    assert layers["L5"]["memory"]["bundle_id"] == bundle.bundle_id
    theirs = {**own, "memory": {"agent": "bob", "stores": ["semantic"]}}
    refused = await client.post("/v1/context-pack", json=theirs, headers=ana)
    assert refused.status_code in (200, 403), refused.text
    assert "vault" not in refused.text and "checklist" not in refused.text


@pytest.fixture
def stub() -> Iterator[RerankStub]:
    # The "cross-encoder" likes long documents best: an order no first stage here produces.
    with RerankStub(scorer=lambda q, d: float(len(d))) as server:
        yield server


async def test_cross_rerank_and_hyde_use_the_servers_endpoints_as_the_library_does(
    seeded: str,
    stub: RerankStub,
) -> None:
    reader = bearer(token(seeded, "ragstore_reader"))
    reranker = HttpReranker(stub.rerank_url, "rr", sleep=lambda s: None)
    hyde = Hyde(stub.chat_url, "chat", api_key_env=None, sleep=lambda s: None)
    query = "copies files to topic 3"
    with Store(seeded, pool_size=1) as store:
        crossed = store.search("docs", query, k=3, mode="hnsw", rerank="cross", reranker=reranker, rerank_depth=8)
        hyded = store.search("docs", query, k=5, mode="hnsw", hyde=hyde)
    assert [h.first_rank for h in crossed] != [1, 2, 3]  # the reranker reordered
    async for client in client_for(seeded, reranker=reranker, hyde=hyde):
        sent = len(stub.requests)
        body: dict[str, Any] = {"query": query, "k": 3, "mode": "hnsw", "rerank": "cross", "rerank_depth": 8}
        answer = await client.post("/v1/families/docs/search", json=body, headers=reader)
        assert answer.status_code == 200, answer.text
        assert answer.json()["hits"] == [h.as_dict() for h in crossed]
        assert stub.requests[sent].body["query"] == query and len(stub.requests[sent].body["documents"]) == 8
        answer = await client.post(
            "/v1/families/docs/search", json={"query": query, "k": 5, "mode": "hnsw", "hyde": True}, headers=reader
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["hits"] == [h.as_dict() for h in hyded]
    async for client in client_for(seeded):
        for extra, name in (({"rerank": "cross"}, "no reranker"), ({"hyde": True}, "no HyDE endpoint")):
            refused = await client.post("/v1/families/docs/search", json={"query": query, **extra}, headers=reader)
            assert refused.status_code == 400 and name in refused.json()["error"], refused.text
        for extra in ({"reranker_url": stub.rerank_url}, {"hyde_url": stub.chat_url}):
            refused = await client.post("/v1/families/docs/search", json={"query": query, **extra}, headers=reader)
            assert refused.status_code == 400 and next(iter(extra)) in refused.json()["error"]
