"""Bearer tokens: printed once, kept as a SHA-256, listed without the secret, revoked, owner-only."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result
from psycopg import sql
from psycopg.conninfo import make_conninfo

from ragstore.cli.main import cli
from ragstore.serve import tokens
from tests.toolkit.roles import end_sessions


def run(dsn: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--dsn", dsn, "token", *args], catch_exceptions=False)


@pytest.fixture
def login_role(conn: psycopg.Connection[Any], dsn: str) -> Iterator[tuple[str, str]]:
    """A LOGIN member of ragstore_app: (its name, the DSN it connects with)."""
    role = f"rs_tok_test_{uuid.uuid4().hex[:8]}"
    ident = sql.Identifier(role)
    conn.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE ragstore_app").format(ident))
    conn.commit()
    yield role, make_conninfo(dsn, user=role)
    conn.rollback()
    end_sessions(conn, role)
    conn.execute(sql.SQL("DROP OWNED BY {}").format(ident))
    conn.execute(sql.SQL("DROP ROLE {}").format(ident))
    conn.commit()


async def role_of(dsn: str, token: str) -> str | None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
        return await tokens.authenticate(aconn, token)


def test_create_prints_the_token_once_and_keeps_only_its_hash(dsn: str, conn: psycopg.Connection[Any]) -> None:
    result = run(dsn, "create", "--role", "ragstore_reader", "--name", "ci-reader")
    assert result.exit_code == 0, result.output
    token = result.stdout.strip()
    parsed = tokens.parse(token)
    assert parsed is not None
    token_id, secret = parsed
    row = conn.execute("SELECT name, role, token_sha256 FROM ragstore.api_tokens WHERE id = %s", (token_id,)).fetchone()
    assert row == ("ci-reader", "ragstore_reader", hashlib.sha256(secret.encode()).digest())
    dumped = conn.execute("SELECT row_to_json(t)::text FROM ragstore.api_tokens t").fetchall()
    assert secret not in json.dumps(dumped)
    listed = run(dsn, "list", "--json")
    assert listed.exit_code == 0
    assert secret not in listed.output
    entry = next(t for t in json.loads(listed.output) if t["id"] == token_id)
    assert entry["name"] == "ci-reader" and entry["role"] == "ragstore_reader" and entry["revoked_at"] is None


async def test_authenticate_gives_the_role_until_revoked(dsn: str, conn: psycopg.Connection[Any]) -> None:
    new = tokens.create(conn, "ragstore_app", "worker")
    assert await role_of(dsn, new.token) == "ragstore_app"
    assert conn.execute(
        "SELECT last_used_at IS NOT NULL FROM ragstore.api_tokens WHERE id = %s", (new.id,)
    ).fetchone() == (True,)
    token_id, secret = tokens.parse(new.token) or (0, "")
    wrong = f"rst_{token_id}_{secret[:-1]}{'A' if secret[-1] != 'A' else 'B'}"
    assert await role_of(dsn, wrong) is None
    assert await role_of(dsn, f"rst_{token_id + 1000}_{secret}") is None
    for junk in ("", "Bearer", new.token + "'; DROP TABLE ragstore.chunks; --", "rst_1_x", "rst_0_" + secret):
        assert await role_of(dsn, junk) is None
    result = run(dsn, "revoke", "worker")
    assert result.exit_code == 0 and f"id {new.id}" in result.output
    assert await role_of(dsn, new.token) is None
    again = run(dsn, "revoke", str(new.id))
    assert again.exit_code == 1 and "no live token" in again.output


def test_a_live_name_is_unique_and_a_revoked_one_can_be_reused(dsn: str, conn: psycopg.Connection[Any]) -> None:
    tokens.create(conn, "ragstore_reader", "dup")
    second = run(dsn, "create", "--role", "ragstore_reader", "--name", "dup")
    assert second.exit_code == 1 and "exists already" in second.output
    assert run(dsn, "revoke", "dup").exit_code == 0
    assert run(dsn, "create", "--role", "ragstore_reader", "--name", "dup").exit_code == 0


@pytest.mark.parametrize(
    ("role", "message"),
    [("no_such_role_xyz", "does not exist"), ("postgres", "superuser"), ("pg_monitor", "not a member")],
)
def test_a_token_role_must_be_a_ragstore_role_and_not_a_superuser(dsn: str, role: str, message: str) -> None:
    result = run(dsn, "create", "--role", role)
    assert result.exit_code == 1 and message in result.output


def test_a_bad_name_is_refused(dsn: str) -> None:
    result = run(dsn, "create", "--role", "ragstore_reader", "--name", "a b\n")
    assert result.exit_code == 1 and "token name" in result.output


def test_a_member_role_may_have_a_token(dsn: str, login_role: tuple[str, str]) -> None:
    role, _ = login_role
    result = run(dsn, "create", "--role", role, "--json")
    assert result.exit_code == 0
    assert json.loads(result.output)["role"] == role


def test_only_the_owner_side_manages_tokens_and_the_app_cannot_read_them(login_role: tuple[str, str]) -> None:
    _, app_dsn = login_role
    result = run(app_dsn, "create", "--role", "ragstore_app")
    assert result.exit_code == 1 and "permission denied" in result.output
    assert run(app_dsn, "list").exit_code == 1
    with psycopg.connect(app_dsn) as app_conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        app_conn.execute("SELECT token_sha256 FROM ragstore.api_tokens")
