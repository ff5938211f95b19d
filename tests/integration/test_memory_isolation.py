"""Binding by absence and isolation between agents, through ragstore and through plain SQL.

The plain-SQL tests log in as a throw-away LOGIN member of ``ragstore_app`` that the owner bound to
agent ``ana``: a superuser bypasses row-level security whatever the table says, so only a non-superuser
can prove the policy.
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
from psycopg.conninfo import make_conninfo

from ragstore.db.connection import connect
from ragstore.memory import AgentProfile, MemoryRecord, Store, add_records, compose_from_db, grant_agent, recall
from tests.toolkit.roles import end_sessions

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
def app_role(seeded: psycopg.Connection[Any], dsn: str) -> Iterator[str]:
    """A LOGIN member of ragstore_app bound to agent ``ana`` by the owner: the DSN it connects with."""
    role = f"rs_mem_test_{uuid.uuid4().hex[:8]}"
    ident = sql.Identifier(role)
    seeded.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE ragstore_app").format(ident))
    seeded.commit()
    grant_agent(seeded, "ana", role)
    yield make_conninfo(dsn, user=role)
    seeded.rollback()
    end_sessions(seeded, role)
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


def test_plain_sql_as_a_non_superuser_sees_only_its_bound_agent_whatever_it_sets(app_role: str) -> None:
    with psycopg.connect(app_role) as conn:
        rows = conn.execute("SELECT id FROM ragstore.memory ORDER BY id").fetchall()
        assert rows == [("a-dec",), ("a-sem",)]
        # the setting that used to select the agent grants nothing
        conn.execute("SELECT set_config('ragstore.agent', 'bob', false)")
        assert conn.execute("SELECT count(*) FROM ragstore.memory WHERE agent = 'bob'").fetchone() == (0,)
        assert conn.execute("SELECT array_agg(id ORDER BY id) FROM ragstore.memory").fetchone() == (["a-dec", "a-sem"],)


def test_plain_sql_as_a_non_superuser_cannot_write_for_another_agent(app_role: str) -> None:
    with psycopg.connect(app_role) as conn:
        conn.execute("SELECT set_config('ragstore.agent', 'bob', false)")
        with pytest.raises(pgerrors.InsufficientPrivilege, match="row-level security"):
            conn.execute(
                "INSERT INTO ragstore.memory (agent, id, store, at, content)"
                " VALUES ('bob', 'x', 'semantic', now(), 'forged')"
            )


def test_plain_sql_as_a_non_superuser_cannot_update_or_delete(seeded: psycopg.Connection[Any], app_role: str) -> None:
    for statement in ("UPDATE ragstore.memory SET content = 'changed'", "DELETE FROM ragstore.memory"):
        with psycopg.connect(app_role) as conn, pytest.raises(pgerrors.InsufficientPrivilege):
            conn.execute(statement)
    assert seeded.execute("SELECT count(*) FROM ragstore.memory").fetchone() == (3,)


def test_ragstore_reads_work_for_a_non_superuser_through_the_policy(app_role: str) -> None:
    with connect(app_role) as conn:
        bundle = compose_from_db(conn, AgentProfile(agent="ana", stores=["semantic", "decision"]), now=NOW)
        assert bundle.ok and [r.id for r in bundle.all_records()] == ["a-sem", "a-dec"]
        other = compose_from_db(conn, AgentProfile(agent="bob", stores=["semantic"]), now=NOW)
        assert other.ok and list(other.all_records()) == []
