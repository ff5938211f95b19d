"""``ragstore mcp`` through the official SDK client over stdio: a real server process on a real database.

Each test spawns ``.venv/bin/ragstore mcp`` with the test database's DSN in its environment, as an MCP
host would, and talks to it with ``mcp.client.stdio.stdio_client`` and ``ClientSession``.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from ragstore import Store
from tests.integration.test_chunks import records
from tests.integration.test_roles import _login_role

pytest.importorskip("mcp")

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

RAGSTORE = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "ragstore"
pytestmark = pytest.mark.slow  # each test starts a server process (about a second or more under load)


@pytest.fixture
def seeded(dsn: str) -> str:
    with Store(dsn, pool_size=2) as store:
        store.create_family("docs", "offline")
        store.create_family("other", "offline")
        store.index(records(), "docs")
        store.index(
            [
                {
                    "chunk_id": "h1",
                    "package_path": "guide/a.md",
                    "text": "heading chunk",
                    "metadata": {"heading": "Intro", "page": 3},
                }
            ],
            "other",
        )
    return dsn


@asynccontextmanager
async def session(dsn: str, *args: str) -> AsyncIterator[ClientSession]:
    env = {"RAGSTORE_DSN": dsn, "PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}
    params = StdioServerParameters(command=str(RAGSTORE), args=["mcp", *args], env=env)
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            yield client


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def call(client: ClientSession, name: str, **arguments: Any) -> Any:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, text_of(result)
    return json.loads(text_of(result))


async def test_tools_are_listed_with_schemas_and_memory_add_only_with_allow_writes(seeded: str) -> None:
    async with session(seeded) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) == {"search", "list_families", "get_chunks", "memory_recall", "memory_compose"}
        schema = listed["search"].input_schema
        assert schema["required"] == ["family", "query"]
        assert schema["properties"]["k"]["maximum"] == 100
        assert listed["search"].description
        refused = await client.call_tool("memory_add", {"agent": "ana", "store_name": "episodic", "content": "x"})
        assert refused.is_error
    async with session(seeded, "--allow-writes") as client:
        assert "memory_add" in {tool.name for tool in (await client.list_tools()).tools}


async def test_search_gives_the_librarys_hits_with_citations(seeded: str) -> None:
    modes = ("fts", "auto", "exact")
    with Store(seeded, pool_size=1) as store:
        expected = {mode: store.search("docs", "topic 3 copies", k=5, mode=mode) for mode in modes}
    async with session(seeded) as client:
        families = await call(client, "list_families")
        assert [f["name"] for f in families["families"]] == ["docs", "other"]
        answers = {
            mode: await call(client, "search", family="docs", query="topic 3 copies", k=5, mode=mode) for mode in modes
        }
    for mode in modes:
        hits = answers[mode]["hits"]
        assert len(hits) == 5, mode
        assert [h["chunk_id"] for h in hits] == [h.chunk_id for h in expected[mode]], mode
        assert [h["citation"] for h in hits] == [h.citation for h in expected[mode]], mode
        assert [h["score"] for h in hits] == [round(h.score, 6) for h in expected[mode]], mode
        assert all(h["package_path"] and h["text"] for h in hits)
        assert "truncated" not in answers[mode]


async def test_get_chunks_cites_heading_and_page_and_names_the_missing(seeded: str) -> None:
    async with session(seeded) as client:
        answer = await call(client, "get_chunks", family="other", ids=["h1", "nope"])
    assert answer["missing"] == ["nope"]
    (chunk,) = answer["chunks"]
    assert (chunk["citation"], chunk["heading"], chunk["page"], chunk["text"]) == (
        "[guide/a.md#h1]",
        "Intro",
        3,
        "heading chunk",
    )


async def test_a_hostile_filter_or_family_is_a_one_line_tool_error(seeded: str) -> None:
    password_dsn = make_conninfo(seeded, password="s3cret-pw")
    async with session(password_dsn) as client:
        for arguments in (
            {"family": "docs", "query": "x", "filter": {"lang": {"$where": "1); DROP TABLE ragstore.chunks; --"}}},
            {"family": "docs'; DROP TABLE ragstore.chunks; --", "query": "x"},
        ):
            result = await client.call_tool("search", arguments)
            message = text_of(result)
            assert result.is_error, arguments
            assert "\n" not in message.strip() and "Traceback" not in message and "s3cret-pw" not in message
        # Outside the input schema: the SDK refuses it before the tool runs, in one line too.
        too_many = await client.call_tool("search", {"family": "docs", "query": "x", "k": 1000})
        assert too_many.is_error and "less than or equal to 100" in text_of(too_many)
        assert "\n" not in text_of(too_many).strip()
    with psycopg.connect(seeded) as conn:
        row = conn.execute("SELECT count(*) FROM ragstore.chunks WHERE family = 'docs'").fetchone()
    assert row is not None and row[0] == len(records())


async def test_max_chars_bounds_the_answer_with_a_note(seeded: str) -> None:
    async with session(seeded) as client:
        full = await call(client, "search", family="docs", query="chunk copies files", k=20, mode="fts")
        small = await client.call_tool(
            "search", {"family": "docs", "query": "chunk copies files", "k": 20, "mode": "fts", "max_chars": 600}
        )
    text = text_of(small)
    assert len(text) <= 600 and len(json.dumps(full, ensure_ascii=False)) > 600
    answer = json.loads(text)
    assert "max_chars=600" in answer["truncated"]
    assert 0 < len(answer["hits"]) < len(full["hits"])
    assert [h["chunk_id"] for h in answer["hits"]] == [h["chunk_id"] for h in full["hits"][: len(answer["hits"])]]


async def test_writes_and_memory_obey_the_role_of_the_dsn(seeded: str) -> None:
    for reader in _login_role(seeded, "ragstore_reader"):
        async with session(make_conninfo(seeded, user=reader), "--allow-writes") as client:
            families = await call(client, "list_families")
            assert len(families["families"]) == 2
            denied = await client.call_tool(
                "memory_add", {"agent": "ana", "store_name": "episodic", "content": "the reader may not write"}
            )
            assert denied.is_error and "permission denied" in text_of(denied).lower()
    async with session(seeded, "--allow-writes") as client:
        added = await call(client, "memory_add", agent="ana", store_name="episodic", content="deploys on fridays")
        assert added["added"] == 1
        recalled = await call(client, "memory_recall", agent="ana", query="deploys fridays", k=3)
        composed = await client.call_tool("memory_compose", {"agent": "ana", "stores": ["episodic"]})
        assert not composed.is_error and "deploys on fridays" in text_of(composed)
    assert [h["record"]["content"] for h in recalled["hits"]] == ["deploys on fridays"]


async def test_an_agents_memory_is_out_of_reach_of_a_role_bound_to_another(seeded: str) -> None:
    from ragstore.memory.principals import grant_agent

    with Store(seeded, pool_size=1) as store:
        store.memory.add(
            [
                {"agent": "ana", "store": "semantic", "content": "ana likes tea"},
                {"agent": "bob", "store": "semantic", "content": "bob's secret is blue"},
            ]
        )
    for app_role in _login_role(seeded, "ragstore_app"):
        with psycopg.connect(seeded) as conn:
            grant_agent(conn, "ana", app_role)
        async with session(make_conninfo(seeded, user=app_role), "--allow-writes") as client:
            own = await call(client, "memory_recall", agent="ana", query="tea", k=5)
            assert [h["record"]["content"] for h in own["hits"]] == ["ana likes tea"]
            other = await client.call_tool("memory_recall", {"agent": "bob", "query": "secret blue", "k": 5})
            assert "blue" not in text_of(other)
            composed = await client.call_tool("memory_compose", {"agent": "bob"})
            assert "blue" not in text_of(composed)
            forged = await client.call_tool(
                "memory_add", {"agent": "bob", "store_name": "semantic", "content": "forged by ana's host"}
            )
            assert forged.is_error, text_of(forged)
    with psycopg.connect(seeded) as conn:
        row = conn.execute("SELECT count(*) FROM ragstore.memory WHERE agent = 'bob'").fetchone()
    assert row is not None and row[0] == 1


def test_an_unreachable_database_is_one_line_without_the_password() -> None:
    import subprocess

    env = {**os.environ, "RAGSTORE_DSN": "postgresql://agent:s3cret-pw@127.0.0.1:1/none"}
    done = subprocess.run([str(RAGSTORE), "mcp"], input="", capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: cannot connect to ")
    assert "s3cret-pw" not in done.stderr + done.stdout and "***" in done.stderr
