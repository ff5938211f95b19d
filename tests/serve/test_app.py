# ruff: noqa: F811  (the fixtures imported below are arguments of the tests)
"""The HTTP API through a real client (httpx to uvicorn on 127.0.0.1) on a real database: every
endpoint, the token roles' rights as the database grants them, the limits, and hostile input."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from ragstore import Store
from ragstore.serve import tokens
from tests.toolkit.app import bearer, client, client_for, seeded, token  # noqa: F401  (fixtures)
from tests.toolkit.roles import _login_role


def count(dsn: str, family: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM ragstore.chunks WHERE family = %s", (family,)).fetchone()
    assert row is not None
    return int(row[0])


async def test_health_and_the_openapi_document_need_no_token(client: httpx.AsyncClient) -> None:
    health = await client.get("/healthz")
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    doc = (await client.get("/openapi.json")).json()
    assert {"/v1/families", "/v1/families/{family}/search", "/v1/families/{family}/chunks"} <= set(doc["paths"])


async def test_no_token_a_wrong_one_or_a_revoked_one_is_a_bare_401(client: httpx.AsyncClient, seeded: str) -> None:
    good = token(seeded, "ragstore_reader", "r1")
    assert (await client.get("/v1/families", headers=bearer(good))).status_code == 200
    token_id, secret = tokens.parse(good) or (0, "")
    wrong = f"rst_{token_id}_{secret[::-1]}"
    for headers in (
        {},
        {"Authorization": "Bearer"},
        bearer(wrong),
        bearer("rst_1_' OR 1=1 --"),
        {"Authorization": good},
    ):
        answer = await client.get("/v1/families", headers=headers)
        assert answer.status_code == 401, headers
        assert answer.json() == {"error": "unauthorized"}
        assert answer.headers["www-authenticate"] == "Bearer"
    with psycopg.connect(seeded) as conn:
        tokens.revoke(conn, "r1")
    assert (await client.get("/v1/families", headers=bearer(good))).status_code == 401


async def test_search_gives_the_librarys_hits_as_the_cli_prints_them(client: httpx.AsyncClient, seeded: str) -> None:
    reader = bearer(token(seeded, "ragstore_reader"))
    for body in (
        {"query": "copies files to topic 3", "k": 5},
        {"query": "delete moves words", "k": 7, "mode": "hybrid", "where": {"lang": "en"}},
        {"query": "topic 2", "k": 4, "mode": "fts", "package": "guide/"},
        {"query": "copies files", "k": 6, "mode": "exact"},
    ):
        answer = await client.post("/v1/families/docs/search", json=body, headers=reader)
        assert answer.status_code == 200, answer.text
        with Store(seeded, pool_size=1) as store:
            options = {"k": body["k"], "mode": body.get("mode", "auto"), "package": body.get("package")}
            hits = store.search("docs", str(body["query"]), metadata=body.get("where"), **options)
        assert hits, body
        assert answer.json() == {"family": "docs", "query": body["query"], "hits": [h.as_dict() for h in hits]}


async def test_families_and_get_chunks(client: httpx.AsyncClient, seeded: str) -> None:
    reader = bearer(token(seeded, "ragstore_reader"))
    families = (await client.get("/v1/families", headers=reader)).json()["families"]
    assert [f["name"] for f in families] == ["docs", "other"]
    got = await client.get("/v1/families/docs/chunks", params={"id": ["c01", "c02", "nope"]}, headers=reader)
    assert got.status_code == 200
    data = got.json()
    assert [c["chunk_id"] for c in data["chunks"]] == ["c01", "c02"] and data["missing"] == ["nope"]


async def test_the_app_role_indexes_and_deletes_and_the_other_family_is_untouched(
    client: httpx.AsyncClient, seeded: str
) -> None:
    app = bearer(token(seeded, "ragstore_app"))
    new = [{"chunk_id": "n1", "package_path": "new/x.md", "text": "a new chunk about herons"}]
    indexed = await client.post("/v1/families/docs/chunks", json={"records": new}, headers=app)
    assert indexed.status_code == 200, indexed.text
    assert indexed.json()["inserted"] == 1
    hits = await client.post("/v1/families/docs/search", json={"query": "herons", "k": 1, "mode": "fts"}, headers=app)
    assert hits.json()["hits"][0]["chunk_id"] == "n1"
    before = count(seeded, "other")
    deleted = await client.delete("/v1/families/docs/chunks", params={"id": "n1", "package": "ref/"}, headers=app)
    assert deleted.status_code == 200, deleted.text
    assert count(seeded, "docs") == 24 - 6 and count(seeded, "other") == before
    none = await client.delete("/v1/families/docs/chunks", headers=app)
    assert none.status_code == 400 and "at least one id or package" in none.json()["error"]


async def test_a_reader_token_cannot_index_or_delete(client: httpx.AsyncClient, seeded: str) -> None:
    reader = bearer(token(seeded, "ragstore_reader"))
    new = [{"chunk_id": "n1", "package_path": "new/x.md", "text": "refused"}]
    indexed = await client.post("/v1/families/docs/chunks", json={"records": new}, headers=reader)
    assert indexed.status_code == 403
    assert indexed.json()["error"].startswith("permission denied")
    assert "\n" not in indexed.json()["error"]
    deleted = await client.delete("/v1/families/docs/chunks", params={"package": "guide"}, headers=reader)
    assert deleted.status_code == 403 and "permission denied" in deleted.json()["error"]
    assert count(seeded, "docs") == 24


async def test_limits_and_bad_input_are_one_line_errors(client: httpx.AsyncClient, seeded: str) -> None:
    reader = bearer(token(seeded, "ragstore_reader"))
    cases: list[tuple[dict[str, Any], str]] = [
        ({"query": "x", "k": 100_000}, "k"),
        ({"query": "x", "k": 0}, "k"),
        ({"query": ""}, "query"),
        ({"query": "x", "mode": "sql"}, "mode"),
        ({"query": "x", "surprise": 1}, "surprise"),
        ({"k": 3}, "query"),
    ]
    for body, field in cases:
        answer = await client.post("/v1/families/docs/search", json=body, headers=reader)
        assert answer.status_code == 400, body
        message = answer.json()["error"]
        assert f"field {field}" in message and "\n" not in message, message
    bad_json = await client.post(
        "/v1/families/docs/search", content=b"{not json", headers={**reader, "Content-Type": "application/json"}
    )
    assert bad_json.status_code == 400 and set(bad_json.json()) == {"error"}
    missing = await client.post("/v1/families/nosuch/search", json={"query": "x"}, headers=reader)
    assert missing.status_code == 404 and "nosuch" in missing.json()["error"]
    too_many = await client.get(
        "/v1/families/docs/chunks", params={"id": [str(i) for i in range(1001)]}, headers=reader
    )
    assert too_many.status_code == 400


async def test_a_body_over_the_limit_is_refused_whether_its_length_is_declared_or_not(seeded: str) -> None:
    reader = bearer(token(seeded, "ragstore_reader"))
    body = b'{"query": "' + b"x" * 5000 + b'"}'
    async for http in client_for(seeded, max_body=2048):
        declared = await http.post("/v1/families/docs/search", content=body, headers=reader)
        assert declared.status_code == 413 and "2048 bytes" in declared.json()["error"]

        async def chunks() -> AsyncIterator[bytes]:
            for start in range(0, len(body), 1000):
                yield body[start : start + 1000]

        streamed = await http.post(
            "/v1/families/docs/search", content=chunks(), headers={**reader, "Content-Type": "application/json"}
        )
        assert streamed.status_code == 413 and "2048 bytes" in streamed.json()["error"]
        small = await http.post("/v1/families/docs/search", json={"query": "topic"}, headers=reader)
        assert small.status_code == 200


async def test_stacked_or_injected_statements_in_any_field_reach_no_sql(client: httpx.AsyncClient, seeded: str) -> None:
    app = bearer(token(seeded, "ragstore_app"))
    evil = "docs'; DROP TABLE ragstore.chunks; --"
    for answer in (
        await client.post(f"/v1/families/{evil}/search", json={"query": "x"}, headers=app),
        await client.get(f"/v1/families/{evil}/chunks", params={"id": "c01"}, headers=app),
        await client.delete(f"/v1/families/{evil}/chunks", params={"id": "c01"}, headers=app),
    ):
        assert answer.status_code in (400, 404), answer.text
        assert set(answer.json()) == {"error"}
    injected = {"query": "x'); DELETE FROM ragstore.chunks; --", "where": {"lang'; DROP TABLE x; --": "en"}, "k": 3}
    answer = await client.post("/v1/families/docs/search", json=injected, headers=app)
    assert answer.status_code == 200 and answer.json()["hits"] == []
    deleted = await client.delete("/v1/families/docs/chunks", params={"id": "c01' OR '1'='1"}, headers=app)
    assert deleted.status_code == 200 and deleted.json()["chunks"] == 0
    assert count(seeded, "docs") == 24 and count(seeded, "other") == 24


@pytest.fixture
def limited_login(seeded: str) -> Iterator[str]:
    """A LOGIN role that is a member of ragstore_owner and ragstore_reader, not of ragstore_app."""
    for name in _login_role(seeded, "ragstore_owner"):
        with psycopg.connect(seeded, autocommit=True) as admin:
            admin.execute(sql.SQL("GRANT ragstore_reader TO {}").format(sql.Identifier(name)))
        yield make_conninfo(seeded, user=name)


async def test_a_token_role_the_login_role_may_not_take_is_403(seeded: str, limited_login: str) -> None:
    app, reader = bearer(token(seeded, "ragstore_app")), bearer(token(seeded, "ragstore_reader"))
    async for http in client_for(limited_login):
        refused = await http.get("/v1/families", headers=app)
        assert refused.status_code == 403 and "may not act as role 'ragstore_app'" in refused.json()["error"]
        assert (await http.get("/v1/families", headers=reader)).status_code == 200
