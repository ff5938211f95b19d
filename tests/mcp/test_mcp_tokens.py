"""``ragstore mcp --transport http --tokens``: each request runs as its bearer token's database role.

A real server process on the test database (the login: a superuser here, so it may read the tokens and
``SET ROLE`` to each token's role), the official SDK client over streamable HTTP, and raw HTTP for the 401s.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from ragstore import Store
from tests.toolkit.chunks import records
from tests.toolkit.roles import _login_role

pytest.importorskip("mcp")

from ragstore.serve import tokens
from tests.mcp.http_server import client_session, http_server

pytestmark = pytest.mark.slow  # a server process per test

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


@pytest.fixture
def server(dsn: str) -> Iterator[str]:
    with Store(dsn, pool_size=1) as store:
        store.create_family("docs", "offline")
        store.index(records(), "docs")
        store.memory.add(
            [
                {"agent": "ana", "store": "semantic", "content": "ana likes tea"},
                {"agent": "bob", "store": "semantic", "content": "bob's secret is blue"},
            ]
        )
    with http_server(dsn, "--tokens", "--allow-writes") as url:
        yield url


def make_token(dsn: str, role: str) -> str:
    with psycopg.connect(dsn) as conn:
        return tokens.create(conn, role, name=f"t-{role}"[:64]).token


@pytest.mark.parametrize(
    "header", [None, "Bearer", "Bearer rst_1_wrongwrongwrongwrong", "Basic abc", "Bearer x' OR 1=1"]
)
def test_no_or_a_bad_token_is_a_bare_401(server: str, dsn: str, header: str | None) -> None:
    headers = {"Accept": "application/json, text/event-stream"}
    if header is not None:
        headers["Authorization"] = header
    response = httpx.post(server, json=INITIALIZE, headers=headers, timeout=60)
    assert response.status_code == 401
    assert response.json() == {"error": "unauthorized"}


def test_a_revoked_token_is_refused_from_the_next_request(server: str, dsn: str) -> None:
    token = make_token(dsn, "ragstore_reader")
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}
    assert httpx.post(server, json=INITIALIZE, headers=headers, timeout=60).status_code == 200
    with psycopg.connect(dsn) as conn:
        tokens.revoke(conn, "t-ragstore_reader")
    assert httpx.post(server, json=INITIALIZE, headers=headers, timeout=60).status_code == 401


async def test_a_readers_token_searches_but_cannot_write(server: str, dsn: str) -> None:
    with Store(dsn, pool_size=1) as store:
        expected = [h.chunk_id for h in store.search("docs", "topic 3 copies", k=5, mode="fts")]
    async with client_session(server, make_token(dsn, "ragstore_reader")) as client:
        assert "memory_add" in {tool.name for tool in (await client.list_tools()).tools}
        found = await client.call_tool("search", {"family": "docs", "query": "topic 3 copies", "k": 5, "mode": "fts"})
        assert not found.is_error, text_of(found)
        assert [h["chunk_id"] for h in json.loads(text_of(found))["hits"]] == expected
        denied = await client.call_tool(
            "memory_add", {"agent": "ana", "store_name": "episodic", "content": "the reader may not write"}
        )
        assert denied.is_error and "permission denied" in text_of(denied).lower()


async def test_each_token_reaches_only_its_own_agents_memory(server: str, dsn: str) -> None:
    from ragstore.memory.principals import grant_agent

    for ana_role in _login_role(dsn, "ragstore_app"):
        with psycopg.connect(dsn) as conn:
            grant_agent(conn, "ana", ana_role)
        async with client_session(server, make_token(dsn, ana_role)) as client:
            own = await client.call_tool("memory_recall", {"agent": "ana", "query": "tea", "k": 5})
            assert [h["record"]["content"] for h in json.loads(text_of(own))["hits"]] == ["ana likes tea"]
            other = await client.call_tool("memory_recall", {"agent": "bob", "query": "secret blue", "k": 5})
            assert "blue" not in text_of(other)
            composed = await client.call_tool("memory_compose", {"agent": "bob"})
            assert "blue" not in text_of(composed)
            forged = await client.call_tool(
                "memory_add", {"agent": "bob", "store_name": "semantic", "content": "forged by ana's token"}
            )
            assert forged.is_error, text_of(forged)
            added = await client.call_tool("memory_add", {"agent": "ana", "store_name": "semantic", "content": "x"})
            assert not added.is_error, text_of(added)
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT agent, count(*) FROM ragstore.memory GROUP BY agent ORDER BY agent").fetchall()
    assert rows == [("ana", 2), ("bob", 1)]


def test_a_login_that_cannot_read_the_tokens_is_refused_at_start_in_one_line(dsn: str) -> None:
    import os
    import subprocess

    from psycopg.conninfo import make_conninfo

    from tests.mcp.http_server import RAGSTORE, free_port

    for reader in _login_role(dsn, "ragstore_reader"):
        env = {**os.environ, "RAGSTORE_DSN": make_conninfo(dsn, user=reader)}
        command = [str(RAGSTORE), "mcp", "--transport", "http", "--tokens", "--port", str(free_port())]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 1
        assert done.stderr.count("\n") == 1 and "permission denied" in done.stderr.lower(), done.stderr


def test_a_remote_address_needs_tokens(dsn: str) -> None:
    from click.testing import CliRunner

    from ragstore.cli.main import cli

    result = CliRunner().invoke(cli, ["--dsn", dsn, "mcp", "--transport", "http", "--host", "0.0.0.0"])
    assert result.exit_code != 0 and "--allow-remote" in result.output
    result = CliRunner().invoke(
        cli, ["--dsn", dsn, "mcp", "--transport", "http", "--host", "0.0.0.0", "--allow-remote"]
    )
    assert result.exit_code != 0 and "needs --tokens" in result.output
    result = CliRunner().invoke(cli, ["--dsn", dsn, "mcp", "--tokens"])
    assert result.exit_code != 0 and "--transport http only" in result.output


async def test_an_app_token_indexes_text_and_a_reader_token_cannot(server: str, dsn: str) -> None:
    texts = [{"package_path": "notes/app.md", "text": "indexed through an app token"}]
    async with client_session(server, make_token(dsn, "ragstore_reader")) as client:
        denied = await client.call_tool("index_text", {"family": "docs", "texts": texts})
        assert denied.is_error and "permission denied" in text_of(denied).lower()
    async with client_session(server, make_token(dsn, "ragstore_app")) as client:
        added = await client.call_tool("index_text", {"family": "docs", "texts": texts})
        assert not added.is_error, text_of(added)
        assert json.loads(text_of(added))["inserted"] == 1
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT count(*) FROM ragstore.chunks WHERE package_path = 'notes/app.md'").fetchall()
    assert rows == [(1,)]


def test_without_tokens_a_request_from_another_host_or_origin_is_refused(dsn: str) -> None:
    """DNS rebinding: a web page that resolves its own name to 127.0.0.1 cannot drive the loopback server."""
    with http_server(dsn) as url:
        accept = {"Accept": "application/json, text/event-stream"}
        assert httpx.post(url, json=INITIALIZE, headers=accept, timeout=60).status_code == 200
        foreign_host = httpx.post(url, json=INITIALIZE, headers={**accept, "Host": "evil.example"}, timeout=60)
        foreign_origin = httpx.post(
            url, json=INITIALIZE, headers={**accept, "Origin": "http://evil.example"}, timeout=60
        )
    assert foreign_host.status_code >= 400 and foreign_origin.status_code >= 400
