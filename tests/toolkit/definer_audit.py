"""Helpers several test modules share (once in integration/test_definer_audit.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import errors as pgerrors
from psycopg import sql
from psycopg.conninfo import make_conninfo

from tests.toolkit.roles import end_sessions


def login_role(admin_dsn: str, group: str) -> Iterator[str]:
    """A fresh LOGIN role, member of ``group`` (on Citus, created on the coordinator and the workers); dropped after."""
    name = f"rs_{group.split('_')[1]}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(sql.Identifier(name), sql.Identifier(group)))
    try:
        yield make_conninfo(admin_dsn, user=name)
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            end_sessions(admin, name)
            admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


@pytest.fixture
def reader_dsn(dsn: str) -> Iterator[str]:
    yield from login_role(dsn, "ragstore_reader")


@pytest.fixture
def app_dsn(dsn: str) -> Iterator[str]:
    yield from login_role(dsn, "ragstore_app")


@pytest.fixture
def owner_dsn(dsn: str) -> Iterator[str]:
    yield from login_role(dsn, "ragstore_owner")


def stats(target: str, name: str) -> dict[str, Any]:
    """The family's word counts, postings count and ledger sums."""
    with psycopg.connect(target) as conn:
        df = dict(conn.execute("SELECT lexeme, df FROM ragstore.chunk_term_df WHERE family = %s", (name,)).fetchall())
        postings = conn.execute("SELECT count(*) FROM ragstore.chunk_terms WHERE family = %s", (name,)).fetchone()
        ledger = conn.execute(
            "SELECT coalesce(sum(delta), 0), coalesce(sum(tokens), 0) FROM ragstore.family_chunk_deltas"
            " WHERE family = %s",
            (name,),
        ).fetchone()
    return {"df": df, "postings": postings, "ledger": ledger}


def fails(target: str, statement: str) -> bool:
    """True when ``statement`` is refused for lack of privilege or because no such function exists."""
    with psycopg.connect(target, autocommit=True) as conn:
        try:
            conn.execute(statement)
        except (pgerrors.InsufficientPrivilege, pgerrors.UndefinedFunction):
            return True
    return False


TAMPERING = [
    "SELECT ragstore.chunk_term_df_add(ARRAY['docs'], ARRAY['copi'], ARRAY[-29]::bigint[])",
    "SELECT ragstore.chunk_term_df_add(ARRAY['docs'], ARRAY['copi'], ARRAY[1000000]::bigint[])",
    "UPDATE ragstore.chunk_term_df SET df = 1000030 WHERE family = 'docs'",
    "INSERT INTO ragstore.chunk_term_df (family, lexeme, df) VALUES ('docs', 'zzz', 5)",
    "DELETE FROM ragstore.chunk_terms WHERE family = 'docs'",
    "INSERT INTO ragstore.family_chunk_deltas (family, delta, tokens) VALUES ('docs', 1000000, 0)",
    "DELETE FROM ragstore.family_chunk_deltas WHERE family = 'docs'",
    "TRUNCATE ragstore.chunk_term_df",
]
