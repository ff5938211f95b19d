# ruff: noqa: F811  (the fixture imported below is an argument of the tests)
"""The Store and AsyncStore methods of the commands that had none (tests/unit/test_cli_parity.py maps
each command to them), each run against the real database on both stores; and the one rule of the
library's doors: ``ragstore.connect()`` and ``Store()`` use the DSN given or ``$RAGSTORE_DSN`` and never
start the embedded server themselves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ragstore
from ragstore.context import pack_bytes
from ragstore.errors import Conflict, DatabaseUnavailable, InvalidInput, NotFound
from ragstore.evaluation.datasets import read_qrels, read_queries
from tests.toolkit.family_migrate import HashBackend
from tests.toolkit.store import store  # noqa: F401  (fixture)

WORDS = ["apple", "banana", "cherry", "grape", "melon", "kiwi", "lemon", "mango", "peach", "plum"]


def fruit(store: Any) -> None:
    store.create_family("docs", "offline")
    rows = [
        {"chunk_id": f"c{i}", "package_path": "p", "text": f"{w} {WORDS[(i + 3) % 10]} note {i}"}
        for i, w in enumerate(WORDS)
    ]
    store.index(rows, "docs")


def test_migrate_status_and_the_family_tuning(store: Any, tmp_path: Path) -> None:
    status = store.migration_status()
    assert status.up_to_date and status.current == status.head
    fruit(store)
    queries = tmp_path / "q.jsonl"
    queries.write_text("".join(json.dumps({"query_id": f"q{i}", "text": w}) + "\n" for i, w in enumerate(WORDS)))
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("".join(f"q{i}\tc{i}\t2\n" for i in range(10)))
    asked = (read_queries(str(queries)), read_qrels(str(qrels)))
    dry = store.tune_family("docs", *asked, dry_run=True)
    assert dry.stored is False and "fusion" not in store.family("docs").options
    assert dry.report.queries == 10 and len(dry.report.grid) == 22 and dry.as_dict()["stored"] is False
    tuned = store.tune_family("docs", *asked, per_legs=[30])
    assert len(tuned.report.grid) == 44
    assert tuned.stored is (not tuned.report.kept_default and tuned.report.held_out >= tuned.report.default_held_out)
    assert ("fusion" in store.family("docs").options) is tuned.stored
    store.reset_fusion("docs")
    assert "fusion" not in store.family("docs").options
    with pytest.raises(NotFound):
        store.reset_fusion("nope")


def test_family_migration_its_plan_abort_and_storage(store: Any) -> None:
    fruit(store)
    with pytest.raises(Conflict, match="not migrating"):
        store.abort_family_migration("docs")
    plan = store.plan_family_migration("docs", HashBackend(dim=24), sample=3)
    assert (plan.chunks, plan.to_embed, plan.sample) == (10, 10, 3)
    assert store.family("docs").backend == "offline"  # the plan wrote nothing
    report = store.migrate_family("docs", HashBackend(dim=24))
    assert report.written == 10
    moved = store.family("docs")
    assert (moved.backend, moved.model, moved.dim, moved.state) == ("fake", "hash-a", 24, "ready")
    changed = store.migrate_storage("docs", "halfvec")
    assert (changed.target, changed.rebuilt) == ("halfvec", True) and store.family("docs").storage == "halfvec"
    hits = store.search("docs", vector=HashBackend(dim=24).embed(["apple kiwi note 0"])[0], k=1, mode="hnsw")
    assert hits[0].chunk_id == "c0"


def test_embedding_with_a_family_or_a_backend(store: Any) -> None:
    fruit(store)
    family = store.family("docs")
    assert store.embedder("docs").name == family.backend
    matrix = store.embed(["apple", "plum"], family="docs")
    assert np.asarray(matrix).shape == (2, family.dim)
    assert np.allclose(matrix, store.embed(["apple", "plum"], backend="offline"))
    assert store.similarity("apple pie", "apple pie", family="docs") == pytest.approx(1.0, abs=1e-5)
    ranked = store.rank("copy files", ["zebra quantum", "copy files"], backend="offline")
    assert [(r.rank, r.index) for r in ranked] == [(1, 1), (2, 0)] and ranked[0].score == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(InvalidInput, match="not both"):
        store.embed(["x"], family="docs", backend="offline")
    with pytest.raises(NotFound):
        store.embedder("nope")


def test_tokens_memory_bindings_and_import(store: Any, tmp_path: Path) -> None:
    new = store.create_token("ragstore_reader", "reader-one")
    assert new.token.startswith(f"rst_{new.id}_") and new.role == "ragstore_reader"
    listed = {t.name: t for t in store.tokens()}
    assert listed["reader-one"].revoked_at is None and new.token not in repr(listed)
    assert store.revoke_token("reader-one").revoked_at is not None
    with pytest.raises(NotFound):
        store.revoke_token("reader-one")

    memory = store.memory
    assert memory.grant("ana", "ragstore_reader") is True
    assert memory.grant("ana", "ragstore_reader") is False
    assert [(p.agent, p.role) for p in memory.principals("ana")] == [("ana", "ragstore_reader")]
    memory.revoke("ana", "ragstore_reader")
    assert memory.principals("ana") == []
    with pytest.raises(NotFound):
        memory.revoke("ana", "ragstore_reader")
    lines = [
        {"id": "x1", "agent": "ana", "store": "episodic", "at": "2026-05-01T00:00:00Z", "content": "met the auditor"},
        {"id": "x2", "agent": "ana", "store": "semantic", "at": "2026-05-02T00:00:00Z", "content": "audit in May"},
    ]
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    first, again = memory.import_file(path), memory.import_file(path)
    assert (first.added, first.existing, again.added, again.existing) == (2, 0, 0, 2)


def test_a_saved_pack_verifies_until_a_file_changes(store: Any, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\n")
    pack = store.context_pack(brief="check", max_tokens=1000, root=tmp_path, files=[tmp_path / "a.txt"])
    saved = tmp_path / "pack.json"
    saved.write_bytes(pack_bytes(pack))
    assert store.verify_pack(saved, tmp_path).ok and store.verify_pack(pack, tmp_path).ok
    (tmp_path / "a.txt").write_text("two\n")
    assert not store.verify_pack(saved, tmp_path).ok


def test_connect_and_store_never_start_the_embedded_server(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("RAGSTORE_HOME", str(home))
    monkeypatch.delenv("RAGSTORE_DSN", raising=False)
    with pytest.raises(DatabaseUnavailable, match=r"set RAGSTORE_DSN, or use connect\(ragstore\.embedded\.start\(\)\)"):
        ragstore.connect()
    with pytest.raises(DatabaseUnavailable, match=r"Store\.embedded\(\)"):
        ragstore.Store()
    assert not home.exists()  # no server was created, let alone started
    with ragstore.connect(dsn) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    monkeypatch.setenv("RAGSTORE_DSN", dsn)
    with ragstore.connect(autocommit=True) as conn:
        assert conn.autocommit and conn.execute("SELECT 1").fetchone() == (1,)


def test_the_direct_store_of_the_command_line(dsn: str) -> None:
    unreachable = ragstore.Store.direct("postgresql://alice:hunter2@127.0.0.1:1/ragstore")  # nothing opened yet
    for call in (unreachable.families, lambda: unreachable.search("docs", "x"), lambda: unreachable.get("docs", ["a"])):
        # the reads a recovering pool runs once more fail at once here, with the one line
        with pytest.raises(DatabaseUnavailable, match=r"^cannot connect to postgresql://alice:\*\*\*@127\.0\.0\.1:1/"):
            call()
    with ragstore.Store.direct(dsn) as store:
        store.create_family("docs", "offline")
        with store.connection() as conn:
            first = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert [f.name for f in store.families()] == ["docs"]
        with store.connection() as conn, store.connection() as second:
            assert conn.execute("SELECT pg_backend_pid()").fetchone() == first  # kept for the next call
            assert second.execute("SELECT pg_backend_pid()").fetchone() != first
            with pytest.raises(DatabaseUnavailable, match="no connection"), store.connection():
                pass  # at most two open
    with pytest.raises(DatabaseUnavailable, match="is closed"):
        store.families()
