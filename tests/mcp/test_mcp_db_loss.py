"""``ragstore mcp --transport http`` when its database goes away and comes back (through a TCP proxy that is
cut and restored): the calls in the outage fail in one line (a tool error; 503 for a token's check), and
the same server and the same client session answer again once the database is back, with no restart."""

from __future__ import annotations

import json
from typing import Any

import httpx
import psycopg
import pytest

from ragstore import Store
from tests.toolkit.chunks import records

pytest.importorskip("mcp")

from ragstore.serve import tokens
from tests.mcp.http_server import client_session, http_server
from tests.toolkit.tcp_proxy import in_front_of

pytestmark = pytest.mark.reliability

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
SEARCH = {"family": "docs", "query": "topic 3 copies", "k": 3, "mode": "fts"}


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


@pytest.fixture
def proxied(dsn: str) -> Any:
    with Store(dsn, pool_size=1) as store:
        store.create_family("docs", "offline")
        store.index(records(), "docs")
    with in_front_of(dsn) as (proxy, through):
        yield proxy, through


async def test_tool_calls_fail_in_one_line_while_the_database_is_away_and_recover(proxied: Any, dsn: str) -> None:
    proxy, through = proxied
    with http_server(through) as url:
        async with client_session(url) as client:
            before = await client.call_tool("search", SEARCH)
            assert not before.is_error, text_of(before)
            proxy.cut()
            during = await client.call_tool("search", SEARCH)
            assert during.is_error and "\n" not in text_of(during).strip() and "Traceback" not in text_of(during)
            proxy.start()
            after = await client.call_tool("search", SEARCH)
            assert not after.is_error, text_of(after)
    assert json.loads(text_of(after))["hits"] == json.loads(text_of(before))["hits"]


def test_a_token_check_in_the_outage_is_a_503_and_the_server_recovers(proxied: Any, dsn: str) -> None:
    proxy, through = proxied
    with psycopg.connect(dsn) as conn:
        token = tokens.create(conn, "ragstore_reader", name="outage").token
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}
    with http_server(through, "--tokens") as url:
        assert httpx.post(url, json=INITIALIZE, headers=headers, timeout=60).status_code == 200
        proxy.cut()
        during = httpx.post(url, json=INITIALIZE, headers=headers, timeout=60)
        assert during.status_code == 503 and during.json() == {"error": "the database is unavailable"}
        proxy.start()
        assert httpx.post(url, json=INITIALIZE, headers=headers, timeout=60).status_code == 200


async def test_the_first_calls_on_connections_lost_unseen_are_answered(proxied: Any, dsn: str) -> None:
    # Every pooled connection of the server is lost while its socket stays quiet (the pool's check sees
    # nothing): the first search, get_chunks and memory_recall after it are answered on new connections.
    proxy, through = proxied
    recall = {"agent": "alice", "query": "topic", "k": 3}
    with http_server(through) as url:
        async with client_session(url) as client:
            before = await client.call_tool("search", SEARCH)
            assert not before.is_error, text_of(before)
            ids = [hit["chunk_id"] for hit in json.loads(text_of(before))["hits"]]
            assert ids
            chunks_before = await client.call_tool("get_chunks", {"family": "docs", "ids": ids})
            recalled_before = await client.call_tool("memory_recall", recall)
            answers = []
            for tool, arguments in (("search", SEARCH), ("get_chunks", {"family": "docs", "ids": ids})):
                proxy.stale()
                answers.append(await client.call_tool(tool, arguments))
            proxy.stale()
            answers.append(await client.call_tool("memory_recall", recall))
    assert [a.is_error for a in answers] == [False, False, False], [text_of(a) for a in answers]
    assert json.loads(text_of(answers[0]))["hits"] == json.loads(text_of(before))["hits"]
    assert json.loads(text_of(answers[1])) == json.loads(text_of(chunks_before))
    assert json.loads(text_of(answers[2])) == json.loads(text_of(recalled_before))
