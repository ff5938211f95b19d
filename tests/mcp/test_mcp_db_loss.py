"""``ragstore mcp --transport http`` when its database goes away and comes back (through a TCP proxy that is
cut and restored): the calls in the outage fail in one line (a tool error; 503 for a token's check), and
the same server and the same client session answer again once the database is back, with no restart."""

from __future__ import annotations

import json
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ragstore import Store
from tests.toolkit.chunks import records

pytest.importorskip("mcp")

from ragstore.serve import tokens
from tests.mcp.http_server import client_session, http_server
from tests.mcp.tcp_proxy import Proxy

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
    params = conninfo_to_dict(dsn)
    host = str(params.get("host") or "/tmp").split(",")[0]
    port = int(str(params.get("port") or 5432).split(",")[0])
    with Store(dsn, pool_size=1) as store:
        store.create_family("docs", "offline")
        store.index(records(), "docs")
    proxy = Proxy(f"{host}/.s.PGSQL.{port}" if host.startswith("/") else (host, port))
    proxy.start()
    try:
        yield proxy, make_conninfo(dsn, host="127.0.0.1", port=str(proxy.port), connect_timeout="5")
    finally:
        proxy.cut()


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
