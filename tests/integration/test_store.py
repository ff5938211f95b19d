# ruff: noqa: F811  (the fixtures imported below are arguments of the tests)
"""``Store`` and ``AsyncStore``: the same tests against both (the async one driven from a loop thread)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

import ragstore
from ragstore import AsyncStore, Store
from ragstore.errors import DatabaseUnavailable, InvalidInput, ModelMismatch, NotFound
from tests.toolkit.store import store  # noqa: F401  (fixtures)


def records(n: int = 30, dim: int | None = None) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        rec: dict[str, Any] = {
            "chunk_id": f"c{i:03d}",
            "package_path": f"pkg{i % 3}",
            "text": f"chunk {i} about topic {i % 5} with words copy move delete",
            "metadata": {"lang": "en" if i % 2 else "fr", "n": i},
        }
        out.append(rec)
    return out


def test_create_index_search_drop(store: Any) -> None:
    fam = store.create_family("docs", "offline")
    assert store.family("docs") == fam
    assert [f.name for f in store.families()] == ["docs"]
    report = store.index(records(), "docs")
    assert (report.inserted, report.unchanged) == (30, 0)
    again = store.index(iter(records()), "docs")  # any iterable, read once
    assert (again.inserted, again.unchanged) == (0, 30)
    vector = np.ones(fam.dim, dtype=np.float32)
    hits = store.search("docs", vector=vector, k=5)
    assert len(hits) == 5
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    text_hits = store.search("docs", "topic copy", k=3)
    assert 1 <= len(text_hits) <= 3
    store.drop_family("docs")
    with pytest.raises(NotFound):
        store.family("docs")


def test_metadata_filter_returns_k_hits_that_match(store: Any) -> None:
    fam = store.create_family("docs", "offline")
    store.index(records(40), "docs")
    vector = np.linspace(-1, 1, fam.dim).astype(np.float32)
    hits = store.search("docs", vector=vector, k=7, metadata={"lang": "fr"}, mode="hnsw")
    assert len(hits) == 7
    assert all(h.metadata["lang"] == "fr" for h in hits)
    exact = store.search("docs", vector=vector, k=7, metadata={"lang": "fr"}, mode="exact")
    assert [h.chunk_id for h in hits] == [h.chunk_id for h in exact]


def test_a_bad_record_anywhere_writes_nothing(store: Any) -> None:
    store.create_family("docs", "offline")
    bad = [*records(10), {"chunk_id": "x", "package_path": "p", "txt": "typo"}]
    with pytest.raises(InvalidInput, match=r"record 11: .*t"):
        store.index(bad, "docs")
    assert store.family_stats("docs").rows == 0


def test_a_vector_of_another_dimension_is_refused_before_writing(store: Any) -> None:
    fam = store.create_family("docs", "offline")
    rows = records(5)
    rows[4] = {**rows[4], "vector": [0.1] * (fam.dim + 1)}
    with pytest.raises(ModelMismatch, match="record 5"):
        store.index(rows, "docs")
    assert store.family_stats("docs").rows == 0


def test_records_must_be_an_iterable_of_records(store: Any) -> None:
    store.create_family("docs", "offline")
    with pytest.raises(InvalidInput, match="not a single record"):
        store.index({"chunk_id": "a", "package_path": "p", "text": "t"}, "docs")
    with pytest.raises(InvalidInput, match="record 1: a record must be a dict"):
        store.index([42], "docs")


def test_unknown_family_and_bad_arguments(store: Any) -> None:
    with pytest.raises(NotFound):
        store.search("nope", vector=[0.0, 1.0])
    store.create_family("docs", "offline")
    with pytest.raises(InvalidInput, match="k must be"):
        store.search("docs", vector=[1.0], k=0)


def test_store_without_a_database_names_store_embedded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGSTORE_DSN", raising=False)
    with pytest.raises(DatabaseUnavailable, match=r"Store\.embedded\(\)"):
        Store()


def test_bad_pool_sizes_are_refused(dsn: str) -> None:
    with pytest.raises(InvalidInput, match="pool_size"):
        Store(dsn, pool_size=0)
    with pytest.raises(InvalidInput, match="min_size"):
        Store(dsn, pool_size=2, min_size=3)


def test_pooled_connections_carry_the_statement_timeout(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSTORE_STATEMENT_TIMEOUT", "7s")
    with Store(dsn, pool_size=1) as store, store.connection() as conn:
        row = conn.execute("SHOW statement_timeout").fetchone()
        assert row is not None and row[0] == "7s"


def test_the_package_exposes_the_library(dsn: str) -> None:
    assert ragstore.Store is Store and ragstore.AsyncStore is AsyncStore
    assert callable(ragstore.search)
    for name in ("ChunkRecord", "Hit", "IndexReport", "NotFound", "InvalidInput", "RagstoreError"):
        assert getattr(ragstore, name) is not None


def test_the_functional_search_keeps_working(dsn: str) -> None:
    with Store(dsn, pool_size=1) as store:
        fam = store.create_family("docs", "offline")
        store.index(records(), "docs")
    with psycopg.connect(dsn) as conn:
        from pgvector.psycopg import register_vector

        register_vector(conn)
        hits = ragstore.search(conn, "docs", vector=np.ones(fam.dim, dtype=np.float32), k=4, package="pkg1")
    assert len(hits) == 4 and all(h.package_path == "pkg1" for h in hits)


def test_index_files_check_recall_and_context_pack(store: Any, tmp_path: Any) -> None:
    import json

    fam = store.create_family("docs", "offline")
    path = tmp_path / "chunks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records(25)), encoding="utf-8")
    report = store.index_files([path], "docs")
    assert report.inserted == 25
    recall = store.check_recall("docs", samples=5, k=5)
    assert recall.recall == 1.0
    pack = store.context_pack(brief="find copy", max_tokens=4000, root=tmp_path, family="docs", query="topic copy", k=3)
    assert pack.pack_id and pack.layers.L3 is not None and 1 <= len(pack.layers.L3) <= 3
    assert fam.name == "docs"


def test_migrate_on_an_empty_database_then_search(empty_dsn: str) -> None:
    # The pool's connections were opened before the vector type existed: migrate() replaces them.
    with Store(empty_dsn, pool_size=2, min_size=2) as store:
        result = store.migrate()
        assert result.changed and result.after
        fam = store.create_family("docs", "offline")
        store.index(records(12), "docs")
        assert len(store.search("docs", vector=np.ones(fam.dim, dtype=np.float32), k=3)) == 3
        assert not store.migrate().changed


def test_the_async_filter_estimate_is_one_round_trip(dsn: str, tmp_path: Any) -> None:
    # libpq's trace of the client's messages: each round trip the client waits on ends with one Sync.
    from psycopg import pq

    from ragstore.caches import Caches
    from ragstore.search import drive_async, plan
    from ragstore.search.request import make_filter
    from ragstore.search.vector import estimate_key

    async def run() -> list[str]:
        async with AsyncStore(dsn, pool_size=1) as astore:
            await astore.create_family("docs", "offline")
            await astore.index(records(10), "docs")
            fam = await astore.family("docs")
            memo, flt = Caches(), make_filter(None, {"lang": "fr"})
            trace = tmp_path / "trace.txt"
            async with astore.connection() as conn:
                with trace.open("w") as out:
                    conn.pgconn.trace(out.fileno())
                    conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
                    choice = plan.plan_choice(fam, flt, memo)
                    chosen = await drive_async.run(conn, choice, astore._blocking)
                    conn.pgconn.untrace()
            estimate = memo.estimate(estimate_key(fam, flt))
            assert chosen == "exact-subset" and estimate is not None and estimate.rows > 0
            return [line for line in trace.read_text().splitlines() if line.split("\t")[0] == "F"]

    sent = asyncio.run(run())
    assert sum(1 for line in sent if line.split("\t")[2:3] == ["Sync"]) == 1, sent


def test_a_reindex_through_store_index_is_skipped_by_its_bytes(store: Any) -> None:
    # index() goes through the one pass of `ragstore index`: each record is hashed as its JSON line, the
    # hash stored with the chunk, and a re-index of the same records is all unchanged without parsing.
    fam = store.create_family("docs", "offline")
    rows = records(12)
    rows[3] = {**rows[3], "vector": np.linspace(-1, 1, fam.dim).astype(np.float32)}  # numpy is JSON here too
    first = store.index(rows, "docs")
    assert (first.inserted, first.unchanged) == (12, 0)
    with store.connection() if isinstance(store, Store) else _sync_connection(store) as conn:
        hashed = conn.execute(
            "SELECT count(*) FROM ragstore.chunks WHERE family = 'docs' AND source_sha256 IS NOT NULL"
        ).fetchone()
    assert hashed == (12,)
    again = store.index(list(rows), "docs")
    assert (again.inserted, again.updated, again.unchanged, again.embedded) == (0, 0, 12, 0)
    rows[5] = {**rows[5], "text": "a new text"}
    changed = store.index(rows, "docs")
    assert (changed.updated, changed.unchanged) == (1, 11)


def _sync_connection(store: Any) -> Any:
    return store.store.connection()


def test_index_files_reports_the_files_not_read_and_the_progress(store: Any, tmp_path: Any) -> None:
    # What `ragstore index` prints comes from this one call: the files skipped, the validated total, progress.
    store.create_family("docs", "offline")
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nCopy files and directories.\n", encoding="utf-8")
    (folder / "b.md").write_bytes(b"\xff\xfe not utf-8 \x00\x01")
    validated: list[int] = []
    written: list[int] = []
    report = store.index_files(
        [folder], "docs", skip_bad_files=True, on_validated=validated.append, progress=written.append
    )
    assert report.inserted >= 1
    assert [Path(item.path).name for item in report.skipped_files] == ["b.md"]
    assert "skipped_files" not in report.as_dict()
    assert validated == [report.inserted] and sum(written) == report.inserted


def test_the_store_s_index_runs_make_the_backend_once(store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import ragstore.families as families

    made: list[str] = []
    real = families.make_backend

    def counting(name: str, *args: Any, **options: Any) -> Any:
        made.append(name)
        return real(name, *args, **options)

    store.create_family("docs", "offline")
    monkeypatch.setattr(families, "make_backend", counting)
    store.index(records(), "docs")
    store.index(records(5), "docs", prune=True)
    used = store.embedder("docs")  # the Store's caches hold the backend its runs made
    assert made == ["offline"]
    assert store.embedder("docs") is used
