"""Binding by absence and isolation between agents, through ragstore and through plain SQL.

The plain-SQL tests run as a throw-away NOLOGIN role made here (``SET ROLE``): a superuser bypasses
row-level security whatever the table says, so only a non-superuser can prove the policy.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import errors as pgerrors
from psycopg import sql

from ragstore.memory import AgentProfile, MemoryRecord, Store, add_records, compose_from_db, recall

T0 = datetime(2026, 6, 1, tzinfo=UTC)
NOW = T0 + timedelta(days=1)


def rec(id_: str, agent: str, store: str, content: str) -> MemoryRecord:
    return MemoryRecord(id=id_, agent=agent, store=Store(store), at=T0, content=content, confidence=0.9)


@pytest.fixture
def seeded(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    add_records(
        conn,
        [
            rec("a-sem", "ana", "semantic", "ana knows the rollout plan"),
            rec("a-dec", "ana", "decision", "ana decided the rollout plan is secret"),
            rec("b-sem", "bob", "semantic", "bob knows the rollout plan too"),
        ],
    )
    conn.commit()
    return conn


@pytest.fixture
def app_role(seeded: psycopg.Connection[Any]) -> Iterator[str]:
    """A non-superuser with full DML on the memory tables, as an application role would have."""
    role = f"rs_mem_test_{uuid.uuid4().hex[:8]}"
    ident = sql.Identifier(role)
    seeded.execute(sql.SQL("CREATE ROLE {} NOLOGIN NOSUPERUSER NOBYPASSRLS").format(ident))
    seeded.execute(sql.SQL("GRANT USAGE ON SCHEMA ragstore TO {}").format(ident))
    seeded.execute(
        sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON ragstore.memory, ragstore.memory_embeddings TO {}").format(
            ident
        )
    )
    seeded.commit()
    yield role
    seeded.rollback()
    seeded.execute("RESET ROLE")
    seeded.execute(sql.SQL("DROP OWNED BY {}").format(ident))
    seeded.execute(sql.SQL("DROP ROLE {}").format(ident))
    seeded.commit()


def test_an_undeclared_store_never_appears_even_when_it_matches_the_hint(seeded: psycopg.Connection[Any]) -> None:
    profile = AgentProfile(agent="ana", stores=["semantic"])
    bundle = compose_from_db(seeded, profile, now=NOW, task_hint="secret")
    assert set(bundle.records) == {Store.SEMANTIC}
    assert "secret" not in bundle.to_json().decode()
    hits = recall(seeded, profile, "the rollout plan is secret", k=10, now=NOW).hits
    assert [h.record.id for h in hits] == ["a-sem"]


def test_one_agent_never_reads_anothers_records(seeded: psycopg.Connection[Any]) -> None:
    everything = ["episodic", "semantic", "procedural", "decision", "transcript"]
    bundle = compose_from_db(seeded, AgentProfile(agent="bob", stores=everything), now=NOW)
    assert [r.id for r in bundle.all_records()] == ["b-sem"]
    hits = recall(seeded, AgentProfile(agent="bob", stores=everything), "ana rollout plan", k=10, now=NOW).hits
    assert [h.record.id for h in hits] == ["b-sem"]


def test_plain_sql_as_a_non_superuser_sees_only_the_agent_in_ragstore_agent(
    seeded: psycopg.Connection[Any], app_role: str
) -> None:
    seeded.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(app_role)))
    assert seeded.execute("SELECT count(*) FROM ragstore.memory").fetchone() == (0,)  # no agent set: nothing
    seeded.execute("SELECT set_config('ragstore.agent', 'ana', true)")
    rows = seeded.execute("SELECT id FROM ragstore.memory ORDER BY id").fetchall()
    assert rows == [("a-dec",), ("a-sem",)]
    assert seeded.execute("SELECT count(*) FROM ragstore.memory WHERE agent = 'bob'").fetchone() == (0,)
    seeded.rollback()
    seeded.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(app_role)))
    seeded.execute("SELECT set_config('ragstore.agent', 'bob', true)")
    assert seeded.execute("SELECT array_agg(id) FROM ragstore.memory").fetchone() == (["b-sem"],)


def test_plain_sql_as_a_non_superuser_cannot_write_for_another_agent(
    seeded: psycopg.Connection[Any], app_role: str
) -> None:
    seeded.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(app_role)))
    seeded.execute("SELECT set_config('ragstore.agent', 'ana', true)")
    with pytest.raises(pgerrors.InsufficientPrivilege, match="row-level security"):
        seeded.execute(
            "INSERT INTO ragstore.memory (agent, id, store, at, content)"
            " VALUES ('bob', 'x', 'semantic', now(), 'forged')"
        )


def test_plain_sql_as_a_non_superuser_cannot_update_or_delete(seeded: psycopg.Connection[Any], app_role: str) -> None:
    for statement in ("UPDATE ragstore.memory SET content = 'changed'", "DELETE FROM ragstore.memory"):
        seeded.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(app_role)))
        seeded.execute("SELECT set_config('ragstore.agent', 'ana', true)")
        with pytest.raises(pgerrors.InsufficientPrivilege, match="append-only"):
            seeded.execute(statement)
        seeded.rollback()
    assert seeded.execute("SELECT count(*) FROM ragstore.memory").fetchone() == (3,)


def test_ragstore_reads_work_for_a_non_superuser_through_the_policy(
    seeded: psycopg.Connection[Any], app_role: str
) -> None:
    seeded.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(app_role)))
    bundle = compose_from_db(seeded, AgentProfile(agent="ana", stores=["semantic", "decision"]), now=NOW)
    assert bundle.ok and [r.id for r in bundle.all_records()] == ["a-sem", "a-dec"]
    # and the setting does not outlive ragstore's own scope
    assert seeded.execute("SELECT count(*) FROM ragstore.memory").fetchone() == (0,)
