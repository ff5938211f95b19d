"""Agent memory in Postgres: writing, the DB reader's floors/caps/order, failure, erasure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import errors as pgerrors

from ragstore.db.connection import connect
from ragstore.errors import Conflict, InvalidInput, NotFound
from ragstore.memory import (
    AgentProfile,
    FunctionReader,
    MemoryRecord,
    Store,
    add_records,
    bind,
    compose_from_db,
    compose_memory,
    forget,
    import_jsonl,
    postgres_binding,
)
from ragstore.memory.binding import Binding, ReadRequest
from ragstore.memory.store import PostgresReader, memory_layers

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
NOW = T0 + timedelta(days=30)
ALL = AgentProfile(agent="ana", stores=["episodic", "semantic", "procedural", "decision", "transcript"])


def rec(id_: str, store: str, minutes: int, content: str = "", agent: str = "ana", **kw: Any) -> MemoryRecord:
    return MemoryRecord(
        id=id_, agent=agent, store=Store(store), at=T0 + timedelta(minutes=minutes),
        content=content or f"{store} note {id_}", **kw,
    )  # fmt: skip


def corpus() -> list[MemoryRecord]:
    """Hand-built: floors at and around the boundary, ties on ``at``, more than every cap, a future record."""
    out = [
        rec(f"e{i:02d}", "episodic", i, salience=0.2 if i % 3 == 0 else (0.19 if i % 3 == 1 else 0.9))
        for i in range(30)
    ]
    out += [rec(f"s{i:02d}", "semantic", i // 2, confidence=0.3 if i % 2 else 0.29) for i in range(30)]
    out += [rec(f"p{i}", "procedural", 5, f"How to deploy step {i}" if i % 2 else f"how to test {i}") for i in range(8)]
    out += [rec(f"d{i}", "decision", i) for i in range(7)]
    out += [rec(f"t{i:02d}", "transcript", i) for i in range(25)]
    out.append(rec("zz-future", "decision", 60 * 24 * 365))
    out.append(rec("B", "decision", 6))  # ties with d6 at the same instant: "B" < "d6" by code point
    return out


def pure_bundle(records: list[MemoryRecord], profile: AgentProfile, hint: str | None = None) -> bytes:
    binding = bind(
        profile,
        lambda store, agent: FunctionReader(
            lambda req, s=store: [r for r in records if r.store == s and r.agent == agent]
        ),
    )
    return compose_memory(binding, now=NOW, task_hint=hint).to_json()


def test_db_reader_gives_the_pure_composers_bundle_byte_for_byte(conn: psycopg.Connection[Any]) -> None:
    records = corpus()
    add_records(conn, records)
    for hint in (None, "DEPLOY", "how to", "nothing matches"):
        assert compose_from_db(conn, ALL, now=NOW, task_hint=hint).to_json() == pure_bundle(records, ALL, hint)


def test_floors_caps_and_order_through_the_database(conn: psycopg.Connection[Any]) -> None:
    add_records(conn, corpus())
    bundle = compose_from_db(conn, ALL, now=NOW)
    ids = {store.value: [r.id for r in recs] for store, recs in bundle.records.items()}
    # episodic: salience >= 0.2 (0.2 itself passes, 0.19 does not), newest first, cap 10
    assert ids["episodic"] == ["e29", "e27", "e26", "e24", "e23", "e21", "e20", "e18", "e17", "e15"]
    # semantic: confidence >= 0.3 only (the odd ones), cap 10
    assert ids["semantic"] == [f"s{i:02d}" for i in range(29, 9, -2)]
    # procedural: all at the same instant, so id ascending in code-point order, cap 5
    assert ids["procedural"] == ["p0", "p1", "p2", "p3", "p4"]
    # decision: the future record is ignored; "B" and "d6" tie on at and "B" sorts first
    assert ids["decision"] == ["B", "d6", "d5", "d4", "d3"]
    assert ids["transcript"] == [f"t{i:02d}" for i in range(24, 4, -1)]


def test_task_hint_filters_semantic_and_procedural_case_insensitively(conn: psycopg.Connection[Any]) -> None:
    add_records(conn, [*corpus(), rec("sx", "semantic", 0, "Die STRASSE ist lang", confidence=0.9)])
    bundle = compose_from_db(conn, ALL, now=NOW, task_hint="Deploy")
    assert [r.id for r in bundle.records[Store.PROCEDURAL]] == ["p1", "p3", "p5", "p7"]
    assert bundle.records[Store.SEMANTIC] == ()
    assert len(bundle.records[Store.EPISODIC]) == 10  # the hint does not filter episodic
    # casefold, not ILIKE: "ß" casefolds to "ss", so the hint "straße" matches "STRASSE"
    assert [r.id for r in compose_from_db(conn, ALL, now=NOW, task_hint="straße").records[Store.SEMANTIC]] == ["sx"]


def test_hint_with_like_metacharacters_is_matched_literally(conn: psycopg.Connection[Any]) -> None:
    add_records(
        conn,
        [rec("a", "semantic", 1, "100% sure", confidence=1.0), rec("b", "semantic", 2, "100 x sure", confidence=1.0)],
    )
    bundle = compose_from_db(conn, ALL, now=NOW, task_hint="100%")
    assert [r.id for r in bundle.records[Store.SEMANTIC]] == ["a"]


def test_reader_pages_past_non_ascii_rows_until_the_cap_is_full(conn: psycopg.Connection[Any]) -> None:
    # 80 newer non-ASCII records the SQL prefilter must let through but Python rejects, then 3 matches
    noise = [rec(f"n{i:03d}", "semantic", 100 + i, f"café {i}", confidence=1.0) for i in range(80)]
    hits = [rec(f"h{i}", "semantic", i, f"the deploy KEY {i}", confidence=1.0) for i in range(3)]
    add_records(conn, noise + hits)
    reader = PostgresReader(conn, Store.SEMANTIC, "ana")
    found = reader.read(ReadRequest(store=Store.SEMANTIC, agent="ana", limit=2, not_after=NOW, task_hint="Deploy key"))
    assert [r.id for r in found] == ["h2", "h1"]


def test_a_failing_store_contributes_nothing_and_is_reported(dsn: str, conn: psycopg.Connection[Any]) -> None:
    add_records(conn, corpus())
    conn.commit()
    broken = connect(dsn)
    broken.close()  # a real database read that fails: the connection is gone
    binding = Binding(
        agent="ana",
        readers={
            Store.EPISODIC: PostgresReader(conn, Store.EPISODIC, "ana"),
            Store.DECISION: PostgresReader(broken, Store.DECISION, "ana"),
        },
    )
    bundle = compose_memory(binding, now=NOW)
    assert bundle.records[Store.DECISION] == () and len(bundle.records[Store.EPISODIC]) == 10
    assert [(f.store, f.error) for f in bundle.failures] == [(Store.DECISION, "DatabaseUnavailable")]
    assert not bundle.ok


def test_add_is_idempotent_by_id_and_refuses_a_changed_body(conn: psycopg.Connection[Any]) -> None:
    first = rec("m1", "semantic", 1, "the sky is blue", tags=("a",), metadata={"x": 1.5})
    assert add_records(conn, [first]).added == 1
    again = add_records(conn, [first])
    assert (again.added, again.existing) == (0, 1)
    with pytest.raises(Conflict, match="m1"):
        add_records(conn, [rec("m2", "semantic", 2), rec("m1", "semantic", 1, "the sky is green")])
    # the refused call wrote nothing, not even m2
    assert conn.execute("SELECT array_agg(id ORDER BY id) FROM ragstore.memory").fetchone() == (["m1"],)


def test_import_names_file_line_and_field_and_writes_nothing_on_error(
    tmp_path: Path, conn: psycopg.Connection[Any]
) -> None:
    good = {"id": "g1", "agent": "ana", "store": "episodic", "at": "2026-06-01T12:00:00Z", "content": "ok"}
    path = tmp_path / "mem.jsonl"
    path.write_text(json.dumps(good) + "\n\n" + json.dumps({**good, "id": "g2", "salience": 1.5}) + "\n")
    with pytest.raises(InvalidInput, match=r"mem\.jsonl:3: field 'salience'"):
        import_jsonl(conn, path)
    assert conn.execute("SELECT count(*) FROM ragstore.memory").fetchone() == (0,)
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "id": "g2", "store": "semantic"}) + "\n")
    assert import_jsonl(conn, path).added == 2
    assert import_jsonl(conn, path).existing == 2


def test_update_and_delete_are_refused_by_the_database(conn: psycopg.Connection[Any]) -> None:
    add_records(conn, [rec("m1", "semantic", 1)])
    conn.commit()
    for statement in (
        "UPDATE ragstore.memory SET content = 'rewritten' WHERE id = 'm1'",
        "DELETE FROM ragstore.memory WHERE id = 'm1'",
        "TRUNCATE ragstore.memory CASCADE",
    ):
        with pytest.raises(pgerrors.InsufficientPrivilege, match="append-only"):
            conn.execute(statement)
        conn.rollback()
    assert conn.execute("SELECT content FROM ragstore.memory WHERE id = 'm1'").fetchone() == ("semantic note m1",)


def test_forget_erases_the_record_and_its_embeddings_and_logs_without_content(conn: psycopg.Connection[Any]) -> None:
    from ragstore.memory import recall

    add_records(conn, [rec("m1", "semantic", 1, "secret personal detail"), rec("m2", "semantic", 2)])
    recall(conn, ALL, "detail", now=NOW)  # embeds both
    result = forget(conn, "ana", "m1", "GDPR art. 17 request #42")
    assert (result.agent, result.store, result.record_id, result.reason) == (
        "ana",
        "semantic",
        "m1",
        "GDPR art. 17 request #42",
    )
    assert conn.execute("SELECT array_agg(id) FROM ragstore.memory").fetchone() == (["m2"],)
    assert conn.execute("SELECT count(*) FROM ragstore.memory_embeddings WHERE id = 'm1'").fetchone() == (0,)
    log = conn.execute("SELECT row_to_json(l)::text FROM ragstore.memory_forget_log l").fetchall()
    assert len(log) == 1 and "secret" not in log[0][0]
    with pytest.raises(NotFound):
        forget(conn, "ana", "m1", "again")
    with pytest.raises(InvalidInput):
        forget(conn, "ana", "m2", "  ")
    # after the erasure the ordinary path is append-only again, and the log is append-only too
    for statement in ("DELETE FROM ragstore.memory", "DELETE FROM ragstore.memory_forget_log"):
        with pytest.raises(pgerrors.InsufficientPrivilege):
            conn.execute(statement)
        conn.rollback()


@pytest.mark.slow
def test_compose_is_byte_identical_across_processes(dsn: str, conn: psycopg.Connection[Any]) -> None:
    add_records(conn, corpus())
    conn.commit()
    code = (
        "import sys; from datetime import datetime; from ragstore.db.connection import connect;"
        "from ragstore.memory import AgentProfile, compose_from_db;"
        "p = AgentProfile(agent='ana', stores=['episodic','semantic','procedural','decision','transcript']);"
        "c = connect(sys.argv[1]);"
        "b = compose_from_db(c, p, now=datetime.fromisoformat(sys.argv[2]), task_hint='how');"
        "sys.stdout.buffer.write(b.to_json())"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code, dsn, NOW.isoformat()],
            capture_output=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
        ).stdout
        for seed in (1, 2, 3)
    }
    assert outputs == {compose_from_db(conn, ALL, now=NOW, task_hint="how").to_json()}


def test_memory_layers_put_records_in_l4_and_the_bundle_id_in_l5(tmp_path: Path, conn: psycopg.Connection[Any]) -> None:
    add_records(conn, corpus())
    profile = tmp_path / "ana.json"
    profile.write_text(json.dumps({"agent": "ana", "stores": ["decision"]}))
    l4, l5 = memory_layers(conn, profile, None, NOW)
    assert l4[0] == "memory/decision 2026-06-01T12:06:00.000000Z [B] decision note B" and len(l4) == 5
    bundle = compose_from_db(conn, AgentProfile(agent="ana", stores=["decision"]), now=NOW)
    assert l5["memory"]["bundle_id"] == bundle.bundle_id
    assert l5["memory"]["stores"] == {"decision": ["B", "d6", "d5", "d4", "d3"]}
    assert postgres_binding(conn, AgentProfile(agent="ana", stores=["decision"])).stores == (Store.DECISION,)
