# ruff: noqa: F811  (the fixtures imported below are arguments of the tests)
"""The token check of a search (ragstore/serve/app.py, Stores.speculate) through a real client: a search
may start as the role the server remembers for its token, but its hits are answered only when the
database says, for that request, that the token is live; a revocation holds from the next request on."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql
from psycopg.conninfo import make_conninfo

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from ragstore.cli.main import cli
from ragstore.serve import tokens
from tests.toolkit.app import bearer, client, client_for, seeded, token  # noqa: F401  (fixtures)
from tests.toolkit.roles import _login_role

SEARCH = "/v1/families/docs/search"
QUERY = {"query": "copies files to topic 3", "k": 3}


def revoke(dsn: str, name: str) -> None:
    """``ragstore token revoke NAME``, as an operator runs it."""
    result = CliRunner().invoke(cli, ["--dsn", dsn, "token", "revoke", name], catch_exceptions=False)
    assert result.exit_code == 0, result.output


async def test_a_revoked_token_gets_401_on_the_very_next_search(client: httpx.AsyncClient, seeded: str) -> None:
    for n in range(5):  # each round: a token the server has answered searches for, then revoked
        good = bearer(token(seeded, "ragstore_reader", f"round{n}"))
        for _ in range(3):
            answer = await client.post(SEARCH, json=QUERY, headers=good)
            assert answer.status_code == 200 and answer.json()["hits"], answer.text
        revoke(seeded, f"round{n}")
        refused = await client.post(SEARCH, json=QUERY, headers=good)
        assert refused.status_code == 401 and refused.json() == {"error": "unauthorized"}
        assert (await client.post(SEARCH, json=QUERY, headers=good)).status_code == 401
        assert (await client.get("/v1/families", headers=good)).status_code == 401


async def test_a_wrong_secret_for_a_remembered_token_is_401(client: httpx.AsyncClient, seeded: str) -> None:
    good = token(seeded, "ragstore_reader", "known")
    assert (await client.post(SEARCH, json=QUERY, headers=bearer(good))).status_code == 200
    token_id, secret = tokens.parse(good) or (0, "")
    for wrong in (f"rst_{token_id}_{secret[:-1]}x", f"rst_{token_id}_{secret[::-1]}", f"rst_{token_id}_{'A' * 43}"):
        answer = await client.post(SEARCH, json=QUERY, headers=bearer(wrong))
        assert answer.status_code == 401 and answer.json() == {"error": "unauthorized"}
    assert (await client.post(SEARCH, json=QUERY, headers=bearer(good))).status_code == 200


async def test_a_revoke_holds_after_the_servers_connections_were_dropped(
    client: httpx.AsyncClient, seeded: str
) -> None:
    good = bearer(token(seeded, "ragstore_reader", "dropped"))
    assert (await client.post(SEARCH, json=QUERY, headers=good)).status_code == 200
    with psycopg.connect(seeded, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = 'ragstore' AND pid <> pg_backend_pid()"
        ).fetchone()
    assert killed is not None and killed[0] >= 2  # the login pool's and the reader pool's connections
    revoke(seeded, "dropped")
    answer = await client.post(SEARCH, json=QUERY, headers=good)
    assert answer.status_code == 401 and answer.json() == {"error": "unauthorized"}


@pytest.fixture
def owner_login(seeded: str) -> Iterator[tuple[str, str]]:
    """A LOGIN member of ragstore_owner and ragstore_reader: (its name, its DSN)."""
    for name in _login_role(seeded, "ragstore_owner"):
        with psycopg.connect(seeded, autocommit=True) as admin:
            admin.execute(sql.SQL("GRANT ragstore_reader TO {}").format(sql.Identifier(name)))
        yield name, make_conninfo(seeded, user=name)


async def test_a_search_whose_token_check_fails_answers_the_failure_not_the_hits(
    seeded: str, owner_login: tuple[str, str]
) -> None:
    name, login_dsn = owner_login
    good = bearer(token(seeded, "ragstore_reader", "checked"))
    async for http in client_for(login_dsn):
        assert (await http.post(SEARCH, json=QUERY, headers=good)).status_code == 200
        # The server may no longer read the tokens; its reader connections still search.
        with psycopg.connect(seeded, autocommit=True) as admin:
            admin.execute(sql.SQL("REVOKE ragstore_owner FROM {}").format(sql.Identifier(name)))
        answer = await http.post(SEARCH, json=QUERY, headers=good)
        assert answer.status_code == 403 and "hits" not in answer.json(), answer.text
