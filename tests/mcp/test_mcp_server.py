"""``ragstore mcp`` through the official SDK client, over stdio and over streamable HTTP: a real server
process on a real database.

Each test runs once per transport: it spawns ``.venv/bin/ragstore mcp`` with the test database's DSN in its
environment, as an MCP host would, and talks to it with ``ClientSession`` on ``stdio_client`` or, for
``--transport http``, on ``streamable_http_client`` at ``http://127.0.0.1:<port>/mcp``.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from ragstore import Store
from tests.rerank_stub import RerankStub
from tests.toolkit.chunks import records
from tests.toolkit.roles import _login_role

pytest.importorskip("mcp")

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.mcp.http_server import http_session

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
async def stdio_session(dsn: str, *args: str) -> AsyncIterator[ClientSession]:
    env = {"RAGSTORE_DSN": dsn, "PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}
    params = StdioServerParameters(command=str(RAGSTORE), args=["mcp", *args], env=env)
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            yield client


Session = Callable[..., AbstractAsyncContextManager[ClientSession]]


@pytest.fixture(params=["stdio", "http"])
def session(request: pytest.FixtureRequest) -> Session:
    """Opens a client session on a fresh ``ragstore mcp`` process, over the transport of the test's run."""
    return stdio_session if request.param == "stdio" else http_session


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def call(client: ClientSession, name: str, **arguments: Any) -> Any:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, text_of(result)
    return json.loads(text_of(result))


READ_TOOLS = {"search", "list_families", "get_chunks", "context_pack", "memory_recall", "memory_compose"}


async def test_tools_are_listed_with_schemas_and_writes_only_with_allow_writes(seeded: str, session: Session) -> None:
    text = {"package_path": "notes/n.md", "text": "written without leave"}
    async with session(seeded) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) == READ_TOOLS
        schema = listed["search"].input_schema
        assert schema["required"] == ["family", "query"]
        assert schema["properties"]["k"]["maximum"] == 100
        assert all(tool.description and tool.annotations.read_only_hint for tool in listed.values())
        refused = await client.call_tool("memory_add", {"agent": "ana", "store_name": "episodic", "content": "x"})
        assert refused.is_error
        refused = await client.call_tool("index_text", {"family": "other", "texts": [text]})
        assert refused.is_error
    async with session(seeded, "--allow-writes") as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) == READ_TOOLS | {"memory_add", "index_text"}
        assert listed["index_text"].annotations.read_only_hint is False
    with psycopg.connect(seeded) as conn:
        assert conn.execute("SELECT count(*) FROM ragstore.chunks WHERE family = 'other'").fetchone() == (1,)
        assert conn.execute("SELECT count(*) FROM ragstore.memory").fetchone() == (0,)


def cli_search(dsn: str, *args: str) -> Any:
    """The hits of ``ragstore search ... --json`` on ``dsn``, or its one-line error."""
    import subprocess

    env = {**os.environ, "RAGSTORE_DSN": dsn}
    done = subprocess.run(
        [str(RAGSTORE), "search", *args, "--json"], capture_output=True, text=True, env=env, timeout=120
    )
    if done.returncode:
        return done.stderr.strip()
    return json.loads(done.stdout)["hits"]


async def test_search_gives_the_same_hits_as_ragstore_search(seeded: str, session: Session) -> None:
    modes = ("fts", "auto", "exact", "hybrid")
    expected = {mode: cli_search(seeded, "docs", "topic 3 copies", "-k", "5", "--mode", mode) for mode in modes}
    # The offline family's fingerprint vectors refuse MMR: the same refusal reaches the model.
    mmr = cli_search(seeded, "docs", "topic 3 copies", "-k", "5", "--mode", "exact", "--rerank", "mmr")
    assert isinstance(mmr, str) and mmr.startswith("error: --rerank mmr cannot run on family 'docs'")
    async with session(seeded) as client:
        families = await call(client, "list_families")
        assert [f["name"] for f in families["families"]] == ["docs", "other"]
        answers = {
            mode: await call(client, "search", family="docs", query="topic 3 copies", k=5, mode=mode) for mode in modes
        }
        reranked = await client.call_tool(
            "search", {"family": "docs", "query": "topic 3 copies", "k": 5, "mode": "exact", "rerank": "mmr"}
        )
    for mode in modes:
        hits = answers[mode]["hits"]
        assert len(hits) == 5, mode
        assert [h["chunk_id"] for h in hits] == [h["chunk_id"] for h in expected[mode]], mode
        assert [h["citation"] for h in hits] == [h["citation"] for h in expected[mode]], mode
        assert [h["score"] for h in hits] == [round(h["score"], 6) for h in expected[mode]], mode
        assert [h["text"] for h in hits] == [h["text"] for h in expected[mode]], mode
        assert all(h["package_path"] for h in hits)
        assert "truncated" not in answers[mode]
    assert reranked.is_error and text_of(reranked).endswith(mmr.removeprefix("error: "))


async def test_search_filters_by_metadata_and_package_as_ragstore_search(seeded: str, session: Session) -> None:
    where = {"n": {"$gte": 5}}
    arguments = ("docs", "topic copies", "-k", "10", "--mode", "fts")
    filtered = cli_search(seeded, *arguments, "--where", json.dumps(where))
    by_package = cli_search(seeded, *arguments, "--package", "ref/")
    async with session(seeded) as client:
        common = {"family": "docs", "query": "topic copies", "k": 10, "mode": "fts"}
        got_filtered = await call(client, "search", **common, filter=where)
        got_package = await call(client, "search", **common, package="ref/")
    assert filtered and all(h["metadata"]["n"] >= 5 for h in filtered)
    assert by_package and all(h["package_path"].startswith("ref/") for h in by_package)
    assert [h["chunk_id"] for h in got_filtered["hits"]] == [h["chunk_id"] for h in filtered]
    assert [h["chunk_id"] for h in got_package["hits"]] == [h["chunk_id"] for h in by_package]


async def test_get_chunks_cites_heading_and_page_and_names_the_missing(seeded: str, session: Session) -> None:
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


async def test_a_hostile_filter_or_family_is_a_one_line_tool_error(seeded: str, session: Session) -> None:
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


async def test_max_chars_bounds_the_answer_with_a_note(seeded: str, session: Session) -> None:
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


async def test_writes_and_memory_obey_the_role_of_the_dsn(seeded: str, session: Session) -> None:
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


async def test_an_agents_memory_is_out_of_reach_of_a_role_bound_to_another(seeded: str, session: Session) -> None:
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


async def test_context_pack_cites_the_hits_it_keeps_within_the_budget(seeded: str, session: Session) -> None:
    query = "topic 3 copies"
    expected = cli_search(seeded, "docs", query, "-k", "8", "--mode", "hybrid")
    arguments = {"brief": "explain the copies", "family": "docs", "query": query, "constraints": ["cite sources"]}
    async with session(seeded) as client:
        whole = await call(client, "context_pack", **arguments)
        small = await client.call_tool("context_pack", {**arguments, "max_chars": 2500})
        canonical = await call(client, "context_pack", **arguments, format="json")
    assert [c["citation"] for c in whole["citations"]] == [h["citation"] for h in expected]
    assert all(c["citation"] in whole["markdown"] for c in whole["citations"])
    assert "explain the copies" in whole["markdown"] and "cite sources" in whole["markdown"]
    assert "shed" not in whole and whole["budget"]["within_budget"]
    assert [s["ref"] for s in canonical["pack"]["layers"]["L3"]] == [h["citation"] for h in expected]
    assert canonical["pack_id"] == whole["pack_id"]
    text = text_of(small)
    assert not small.is_error and len(text) <= 2500
    cut = json.loads(text)
    kept = [c["citation"] for c in cut["citations"]]
    assert kept == [h["citation"] for h in expected[: len(kept)]] and len(kept) < len(expected)
    # The pack sheds the lowest-ranked snippet first, and reports them in that order.
    assert cut["shed"]["dropped_snippets"] == [h["citation"] for h in reversed(expected[len(kept) :])]
    assert all(c in cut["markdown"] for c in kept)


async def test_index_text_writes_only_its_family_as_the_roles_rules_allow(seeded: str, session: Session) -> None:
    texts = [
        {"package_path": "notes/deploy.md", "text": "we deploy on fridays", "metadata": {"heading": "Deploys"}},
        {"package_path": "notes/deploy.md", "text": "rollbacks take ten minutes", "chunk_id": "notes/deploy.md#r"},
    ]
    for reader in _login_role(seeded, "ragstore_reader"):
        async with session(make_conninfo(seeded, user=reader), "--allow-writes") as client:
            denied = await client.call_tool("index_text", {"family": "other", "texts": texts})
            assert denied.is_error and "permission denied" in text_of(denied).lower()
    async with session(seeded, "--allow-writes") as client:
        first = await call(client, "index_text", family="other", texts=texts)
        again = await call(client, "index_text", family="other", texts=texts)
        found = await call(client, "search", family="other", query="deploy fridays", k=1, mode="fts")
        bad = await client.call_tool("index_text", {"family": "other", "texts": [{"package_path": "x", "text": ""}]})
    assert (first["inserted"], again["unchanged"], again["inserted"]) == (2, 2, 0)
    assert first["chunk_ids"][1] == "notes/deploy.md#r" and first["chunk_ids"][0].startswith("notes/deploy.md#")
    (hit,) = found["hits"]
    assert (hit["chunk_id"], hit["heading"], hit["citation"]) == (
        first["chunk_ids"][0],
        "Deploys",
        f"[{first['chunk_ids'][0]}]",
    )
    assert bad.is_error
    with psycopg.connect(seeded) as conn:
        rows = conn.execute("SELECT family, count(*) FROM ragstore.chunks GROUP BY family ORDER BY family").fetchall()
    assert rows == [("docs", len(records())), ("other", 3)]


async def test_families_are_resources(seeded: str, session: Session) -> None:
    async with session(seeded) as client:
        listed = (await client.list_resources()).resources
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["ragstore://families/{name}"]
        index = json.loads((await client.read_resource("ragstore://families")).contents[0].text)
        read = {str(r.uri): json.loads((await client.read_resource(str(r.uri))).contents[0].text) for r in listed}
        with pytest.raises(Exception, match="other2"):
            await client.read_resource("ragstore://families/other2")
    # One resource per family besides the index, each described (model, dimension, storage) and readable.
    assert [(str(r.uri), r.name) for r in listed] == [
        ("ragstore://families", "families"),
        ("ragstore://families/docs", "docs"),
        ("ragstore://families/other", "other"),
    ]
    with Store(seeded, pool_size=1) as store:
        docs = store.family("docs")
    assert listed[1].description == f"Family docs: offline {docs.model}, dimension {docs.dim}, vector storage"
    assert [(f["name"], f["uri"]) for f in index["families"]] == [
        ("docs", "ragstore://families/docs"),
        ("other", "ragstore://families/other"),
    ]
    other = read["ragstore://families/other"]
    assert (other["name"], other["backend"], other["storage"], other["chunks_total"], other["packages"]) == (
        "other",
        "offline",
        "vector",
        1,
        1,
    )
    assert (read["ragstore://families/docs"]["chunks_total"], read["ragstore://families/docs"]["dim"]) == (
        len(records()),
        docs.dim,
    )
    assert other["chunks"] == [{"chunk_id": "h1", "package_path": "guide/a.md", "citation": "[guide/a.md#h1]"}]


async def test_search_with_cross_rerank_gives_the_hits_of_ragstore_search_rerank_cross(
    seeded: str, session: Session
) -> None:
    # The "cross-encoder" likes long documents best: an order no first stage here produces.
    with RerankStub(scorer=lambda q, d: float(len(d))) as stub:
        flags = ("--reranker-url", stub.rerank_url, "--reranker-model", "rr")
        query = ("docs", "topic 3 copies", "-k", "4", "--mode", "hybrid", "--rerank", "cross", "--rerank-depth", "12")
        expected = cli_search(seeded, *query, *flags)
        assert isinstance(expected, list) and [h["first_rank"] for h in expected] != [1, 2, 3, 4]
        arguments = {"family": "docs", "query": "topic 3 copies", "k": 4, "mode": "hybrid", "rerank": "cross"}
        async with session(seeded, *flags) as client:
            sent = len(stub.requests)
            answer = await call(client, "search", **arguments, rerank_depth=12)
            asked = stub.requests[sent:]
        async with session(seeded) as client:  # started without --reranker-url
            refused = await client.call_tool("search", arguments)
    assert [h["chunk_id"] for h in answer["hits"]] == [h["chunk_id"] for h in expected]
    assert [h["rerank_score"] for h in answer["hits"]] == [round(h["rerank_score"], 6) for h in expected]
    assert answer["rerank"] == "cross"
    assert len(asked) == 1 and asked[0].body["query"] == "topic 3 copies" and len(asked[0].body["documents"]) == 12
    assert refused.is_error and "no reranker" in text_of(refused) and "--reranker-url" in text_of(refused)
