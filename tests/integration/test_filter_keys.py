"""Declared filter keys: a btree per key, read by the filters on it; answers as without the declaration."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql

from ragstore import families
from ragstore.db.dialect import POSTGRES
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import Conflict, InvalidInput, NotFound
from ragstore.families import filter_keys
from ragstore.families.migrate import migrate_family
from ragstore.search import drive, search
from ragstore.search import vector as vec
from ragstore.search.api import run_vector
from ragstore.search.request import make_filter
from tests.toolkit.family_migrate import HashBackend
from tests.toolkit.metafilter import ok
from tests.toolkit.search import clustered, load

pytestmark = pytest.mark.usefixtures("each_storage")  # each test once per index storage

N = 240
KEYS = ("lang", "n", "title", "draft", "tags", "mixed", "missing")
HOSTILE = ("it's", 'a"b', "back\\slash", "'); DROP TABLE ragstore.chunks; --", "é ∑ 🙂", "new\nline", " ", "a.b[0]")


def meta(i: int) -> dict[str, Any]:
    row: dict[str, Any] = {"n": i % 60, "lang": ["en", "fr", "de"][i % 3], "title": f"t{i % 7}"}
    if i % 5 == 0:
        row["draft"] = i % 10 == 0
    if i % 4 == 0:
        row["tags"] = ["a", "b"] if i % 8 == 0 else ["a"]
    row["mixed"] = i % 9 if i % 2 else str(i % 9)  # numbers on odd rows, the same digits as text on even ones
    if i % 11 == 0:
        row["n"] = float(i % 60)  # 3.0 and 3 are one number in JSON
    return row


def hostile_meta(i: int) -> dict[str, Any]:
    return {key: f"v{i % 4}" for key in HOSTILE} | {"n": i}


@pytest.fixture
def loaded(conn: Any) -> families.Family:
    fam = families.create_family(conn, "docs", OfflineBackend())
    load(conn, fam, clustered(N), metadata=[meta(i) for i in range(N)])
    for key in KEYS:
        fam = filter_keys.add_key(conn, "docs", key)
    return fam


def _plan(conn: Any, fam: families.Family, metadata: dict[str, Any], *, analyze: bool = False) -> str:
    """EXPLAIN (with ``analyze``, EXPLAIN ANALYZE) of the exact search over the rows ``metadata`` keeps."""
    flt = make_filter(None, metadata).for_family(fam)
    statement = vec.exact_subset_statement(fam, flt, 10, vectors=False)
    params = {**flt.params(), "q": fam.query_param(clustered(1, dim=fam.dim, seed=3)[0])}
    conn.commit()
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")  # a small table: show which index the planner takes
        if analyze:  # on a few pages a bitmap scan costs about the same: show what the index scan reads
            conn.execute("SET LOCAL enable_bitmapscan = off")
        explain = sql.SQL("EXPLAIN (ANALYZE, COSTS OFF) " if analyze else "EXPLAIN ")
        rows = conn.execute(explain + sql.SQL(statement), params).fetchall()  # type: ignore[arg-type]
    return "\n".join(r[0] for r in rows)


def test_a_filter_on_a_declared_key_reads_its_btree_not_the_gin_index(conn: Any, loaded: families.Family) -> None:
    fam = loaded
    for metadata in ({"lang": "fr"}, {"n": {"$gte": 10, "$lt": 12}}, {"title": {"$in": ["t1", "t2"]}}):
        plan = _plan(conn, fam, metadata)
        assert filter_keys.index_name(fam.table, next(iter(metadata))) in plan, plan
        assert fam.metadata_index not in plan, plan
    undeclared = replace(fam, options={})
    plan = _plan(conn, undeclared, {"lang": "fr"})
    assert fam.metadata_index in plan and "Bitmap" in plan


# What each key holds, and values of other types (type mismatches), per key.
VALUES: dict[str, list[Any]] = {
    "lang": ["en", "fr", "de", "xx", 3, None],
    "n": [3, 3.0, 10, 45, "3", True],
    "title": ["t1", "t3", "t6", 3],
    "draft": [True, False, None, "true", 1],
    "tags": ["a", ["a"], ["a", "b"], "b", {"x": 1}],
    "mixed": [3, "3", 4.0, "x"],
    "missing": ["a", 1],
    "undeclared_key": ["a"],
}
BOUNDS: dict[str, list[Any]] = {
    "lang": ["en", "fr", 3],
    "n": [5, 30, 2.5, "3", -1],
    "title": ["t3", "t0", 3],
    "draft": [1, "a"],
    "tags": ["a", 0],
    "mixed": [4, "4", 0],
    "missing": [1, "a"],
    "undeclared_key": [1],
}


def _random_leaf(rng: random.Random) -> dict[str, Any]:
    key = rng.choice(list(VALUES))
    op = rng.choice(("plain", "plain", "$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$in", "$nin"))
    if op in ("$gt", "$gte", "$lt", "$lte"):
        return {key: {op: rng.choice(BOUNDS[key])}}
    scalars = [v for v in VALUES[key] if not isinstance(v, list | dict)]
    if op in ("$in", "$nin"):
        return {key: {op: rng.sample(scalars, rng.randint(0, len(scalars)))}}
    value = rng.choice(VALUES[key] if op == "plain" else scalars)
    return {key: value} if op == "plain" else {key: {op: value}}


def _random_filter(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    roll = rng.random()
    if depth < 2 and roll < 0.3:
        return {rng.choice(("$and", "$or")): [_random_filter(rng, depth + 1) for _ in range(rng.randint(1, 3))]}
    if roll < 0.45:  # several keys in one object: ANDed
        merged: dict[str, Any] = {}
        for _ in range(rng.randint(2, 3)):
            merged |= _random_leaf(rng)
        return merged
    return _random_leaf(rng)


def test_random_filters_answer_the_same_with_and_without_declared_keys(conn: Any, loaded: families.Family) -> None:
    fam = loaded
    undeclared = replace(fam, options={})
    rng = random.Random(7)
    q = clustered(1, seed=5)[0]
    kept_some = 0
    for _ in range(150):  # about 3 s
        metadata = _random_filter(rng)
        flt = make_filter(None, metadata)
        declared = run_vector(conn, fam, q, k=N, flt=flt, plan=vec.PLAN_EXACT_SUBSET)
        plain = run_vector(conn, undeclared, q, k=N, flt=flt, plan=vec.PLAN_EXACT_SUBSET)
        assert [h.chunk_id for h in declared] == [h.chunk_id for h in plain], metadata
        top = search(conn, "docs", vector=q, k=10, metadata=metadata)  # the declared keys, the chosen plan
        assert [h.chunk_id for h in top] == [h.chunk_id for h in plain[:10]], metadata
        kept_some += bool(plain)
    assert kept_some > 45  # a third of the filters keep rows (most others AND conditions that exclude)


def test_hostile_key_names_are_declared_filtered_on_and_removed(conn: Any) -> None:
    fam = families.create_family(conn, "docs", OfflineBackend())
    load(conn, fam, clustered(40), metadata=[hostile_meta(i) for i in range(40)])
    q = clustered(1, seed=5)[0]
    for key in HOSTILE:
        fam = filter_keys.add_key(conn, "docs", key)
    assert fam.filter_keys == tuple(sorted(HOSTILE))
    assert all(k.valid for k in filter_keys.list_keys(conn, "docs"))
    assert conn.execute("SELECT count(*) FROM ragstore.chunks").fetchone() == (40,)
    for key in HOSTILE:
        for metadata in ({key: "v1"}, {key: {"$in": ["v2", "v3"]}}, {key: {"$gt": "v2"}}):
            hits = search(conn, "docs", vector=q, k=40, metadata=metadata)
            assert {h.chunk_id for h in hits} == {f"c{i:05d}" for i in range(40) if ok(hostile_meta(i), metadata)}
        assert filter_keys.index_name(fam.table, key) in _plan(conn, fam, {key: "v1"})
    for key in HOSTILE:
        fam = filter_keys.remove_key(conn, "docs", key)
    assert fam.filter_keys == ()
    assert _filter_key_indexes(conn, fam.table) == []


@pytest.mark.parametrize(
    ("key", "words"),
    [
        ("", "non-empty text"),
        (3, "non-empty text"),
        ("a\x00b", "NUL"),
        ("$eq", "starts with \\$"),
        ("k" * 257, "the most is 256"),
    ],
)
def test_a_key_that_cannot_be_declared_is_refused_before_any_change(conn: Any, key: Any, words: str) -> None:
    families.create_family(conn, "docs", OfflineBackend())
    with pytest.raises(InvalidInput, match=words):
        filter_keys.add_key(conn, "docs", key)
    assert families.get_family(conn, "docs").filter_keys == ()


def test_unknown_family_and_undeclared_key_are_named(conn: Any) -> None:
    with pytest.raises(NotFound, match="no family named 'nope'"):
        filter_keys.add_key(conn, "nope", "lang")
    families.create_family(conn, "docs", OfflineBackend())
    with pytest.raises(InvalidInput, match="no declared filter key 'lang'"):
        filter_keys.remove_key(conn, "docs", "lang")


def _filter_key_indexes(conn: Any, table: str) -> list[str]:
    rows = conn.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = 'ragstore' AND tablename = %s AND indexname LIKE %s",
        (table, "%\\_fk%\\_%"),
    ).fetchall()
    conn.commit()
    return sorted(r[0] for r in rows)


def _records(path: Path, n: int) -> Path:
    rows = [
        {"chunk_id": f"c{i:04d}", "package_path": "pkg", "text": f"text {i}", "metadata": {"lang": ["en", "fr"][i % 2]}}
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_declared_keys_survive_a_bulk_index_and_a_model_migration(conn: Any, tmp_path: Path) -> None:
    from ragstore.ingest.readers import open_sources
    from ragstore.ingest.run import index_sources

    fam = families.create_family(conn, "docs", OfflineBackend())
    fam = filter_keys.add_key(conn, "docs", "lang")
    index_sources(conn, "docs", open_sources([str(_records(tmp_path / "a.jsonl", 60))]))  # the bulk path
    assert _filter_key_indexes(conn, fam.table) == [filter_keys.index_name(fam.table, "lang")]
    assert filter_keys.index_name(fam.table, "lang") in _plan(conn, fam, {"lang": "fr"})

    migrate_family(conn, "docs", HashBackend(dim=24))
    moved = families.get_family(conn, "docs")
    assert moved.table != fam.table and moved.filter_keys == ("lang",)
    assert _filter_key_indexes(conn, moved.table) == [filter_keys.index_name(moved.table, "lang")]
    assert [k.valid for k in filter_keys.list_keys(conn, "docs")] == [True]
    assert filter_keys.index_name(moved.table, "lang") in _plan(conn, moved, {"lang": "fr"})
    # the migrated table keeps the GIN index on its metadata copy too (undeclared keys read it)
    gin = conn.execute("SELECT to_regclass(format('ragstore.%%I', %s::text))", (moved.metadata_index,)).fetchone()
    assert gin is not None and gin[0] is not None
    hits = search(conn, "docs", vector=clustered(1, dim=24, seed=1)[0], k=60, metadata={"lang": "fr"})
    assert {h.chunk_id for h in hits} == {f"c{i:04d}" for i in range(1, 60, 2)}


def test_a_bulk_load_into_a_family_with_a_covering_key_leaves_its_scans_off_the_heap(
    conn: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    from ragstore.ingest import writer
    from ragstore.ingest.readers import open_sources
    from ragstore.ingest.run import index_sources

    monkeypatch.setattr(writer, "BULK_THRESHOLD", 10)
    families.create_family(conn, "docs", OfflineBackend())
    fam = filter_keys.add_key(conn, "docs", "lang", covering=True)
    vacuums = _vacuums(conn, fam.table)
    index_sources(conn, "docs", open_sources([str(_records(tmp_path / "a.jsonl", 60))]))  # bulk: CLUSTER rewrites
    # the clustering left an empty visibility map; the VACUUM after it marks the pages all-visible again
    assert _vacuums(conn, fam.table) == vacuums + 1
    plan = _plan(conn, fam, {"lang": "fr"}, analyze=True)
    assert f"Index Only Scan using {filter_keys.index_name(fam.table, 'lang', True)}" in plan, plan
    assert "Heap Fetches: 0" in plan, plan
    hits = search(conn, "docs", vector=clustered(1, seed=3)[0], k=60, metadata={"lang": "fr"})
    assert {h.chunk_id for h in hits} == {f"c{i:04d}" for i in range(1, 60, 2)}


def test_a_migrating_family_refuses_key_changes(conn: Any, tmp_path: Path) -> None:
    families.create_family(conn, "docs", OfflineBackend())
    conn.execute("UPDATE ragstore.families SET state = 'migrating' WHERE name = 'docs'")
    conn.commit()
    with pytest.raises(Conflict, match="being migrated"):
        filter_keys.add_key(conn, "docs", "lang")


def test_drop_removes_the_family_and_its_key_indexes(conn: Any) -> None:
    fam = families.create_family(conn, "docs", OfflineBackend())
    filter_keys.add_key(conn, "docs", "lang")
    assert len(_filter_key_indexes(conn, fam.table)) == 1
    families.drop_family(conn, "docs")
    conn.commit()
    left = conn.execute(
        "SELECT count(*) FROM pg_class WHERE relname = %s", (filter_keys.index_name(fam.table, "lang"),)
    )
    assert left.fetchone() == (0,)


def test_a_migrated_family_keeps_the_gin_index_of_its_metadata_copy(conn: Any, tmp_path: Path) -> None:
    from ragstore.ingest.readers import open_sources
    from ragstore.ingest.run import index_sources

    families.create_family(conn, "docs", OfflineBackend())
    index_sources(conn, "docs", open_sources([str(_records(tmp_path / "a.jsonl", 20))]))
    migrate_family(conn, "docs", HashBackend(dim=24))
    moved = families.get_family(conn, "docs")
    found = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", (moved.metadata_index,)).fetchone()
    assert found is not None and "gin (metadata jsonb_path_ops)" in found[0] and "fastupdate=off" in found[0]


def test_a_family_with_a_tuned_fusion_or_filter_keys_still_indexes(conn: Any, tmp_path: Path) -> None:
    from ragstore.ingest.readers import open_sources
    from ragstore.ingest.run import index_sources
    from ragstore.search.fusion import FusionSettings, store_settings

    families.create_family(conn, "docs", OfflineBackend())
    store_settings(conn, "docs", FusionSettings())  # what `ragstore family tune` stores
    conn.commit()
    filter_keys.add_key(conn, "docs", "lang")
    report = index_sources(conn, "docs", open_sources([str(_records(tmp_path / "a.jsonl", 10))]))
    assert report.inserted == 10  # the family's options that are not the backend's are not passed to it


def _vacuums(conn: Any, table: str) -> int:
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute("SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = %s", (table,)).fetchone()
    conn.commit()
    return int(row[0]) if row else 0


def test_a_covering_key_is_read_by_an_index_only_scan_and_switches_back(conn: Any, loaded: families.Family) -> None:
    vacuums = _vacuums(conn, loaded.table)
    fam = filter_keys.add_key(conn, "docs", "lang", covering=True)
    assert fam.covering == {"lang"}
    # the build ends with a VACUUM: it marks the pages all-visible (unless an older transaction still
    # sees their earlier state), which an index-only scan needs to skip the heap
    assert _vacuums(conn, fam.table) == vacuums + 1
    plan = _plan(conn, fam, {"lang": "fr"}, analyze=True)
    assert f"Index Only Scan using {filter_keys.index_name(fam.table, 'lang', True)}" in plan, plan
    q = clustered(1, seed=5)[0]
    plain = run_vector(conn, replace(fam, options={}), q, k=N, flt=make_filter(None, {"lang": "fr"}))
    assert [h.chunk_id for h in search(conn, "docs", vector=q, k=N, metadata={"lang": "fr"})] == [
        h.chunk_id for h in plain
    ]
    assert _filter_key_indexes(conn, fam.table).count(filter_keys.index_name(fam.table, "lang", True)) == 1
    fam = filter_keys.add_key(conn, "docs", "lang")  # plain again: the covering index goes
    assert fam.covering == frozenset()
    names = _filter_key_indexes(conn, fam.table)
    assert filter_keys.index_name(fam.table, "lang") in names
    assert filter_keys.index_name(fam.table, "lang", True) not in names


def test_covering_is_refused_on_wide_vectors_and_dropped_by_a_migration_to_them(conn: Any, tmp_path: Path) -> None:
    from ragstore.ingest.readers import open_sources
    from ragstore.ingest.run import index_sources

    families.create_family(conn, "docs", OfflineBackend())
    filter_keys.add_key(conn, "docs", "lang", covering=True)
    index_sources(conn, "docs", open_sources([str(_records(tmp_path / "a.jsonl", 12))]))
    migrate_family(conn, "docs", HashBackend(dim=600))
    moved = families.get_family(conn, "docs")
    assert moved.filter_keys == ("lang",) and moved.covering == frozenset()
    assert _filter_key_indexes(conn, moved.table) == [filter_keys.index_name(moved.table, "lang")]
    with pytest.raises(InvalidInput, match="600-d vector vectors: over the 512 dimensions"):
        filter_keys.add_key(conn, "docs", "lang", covering=True)
    assert families.get_family(conn, "docs").covering == frozenset()


def test_a_covering_build_that_fails_leaves_no_invalid_index(conn: Any) -> None:
    fam = families.create_family(conn, "docs", OfflineBackend())
    big = {"lang": "en", "blob": "".join(f"{i * 7919 % 10007:05d}" for i in range(800))}  # 4,000 characters
    load(conn, fam, clustered(3), metadata=[big, {"lang": "fr"}, {}])
    with pytest.raises(Exception, match="index row"):
        filter_keys.add_key(conn, "docs", "lang", covering=True)
    assert _filter_key_indexes(conn, fam.table) == []
    assert families.get_family(conn, "docs").filter_keys == ()
    filter_keys.add_key(conn, "docs", "lang")  # the plain index holds only the key's value
    assert _filter_key_indexes(conn, fam.table) == [filter_keys.index_name(fam.table, "lang")]


def test_a_row_too_large_for_a_covering_index_is_refused_and_nothing_is_written(conn: Any, tmp_path: Path) -> None:
    from ragstore.ingest.readers import open_sources
    from ragstore.ingest.run import index_sources

    families.create_family(conn, "docs", OfflineBackend())
    filter_keys.add_key(conn, "docs", "lang", covering=True)
    index_sources(conn, "docs", open_sources([str(_records(tmp_path / "a.jsonl", 4))]))
    big = tmp_path / "big.jsonl"
    blob = "".join(f"{i * 7919 % 10007:05d}" for i in range(800))
    big.write_text(json.dumps({"chunk_id": "big", "package_path": "pkg", "text": "t", "metadata": {"b": blob}}) + "\n")
    words = r"big.jsonl:1: metadata: .* would take [\d,]+ bytes .* over btree's 2,704; nothing was written"
    with pytest.raises(InvalidInput, match=words):
        index_sources(conn, "docs", open_sources([str(big)]))
    conn.rollback()
    assert conn.execute("SELECT count(*) FROM ragstore.emb_docs").fetchone() == (4,)


def test_a_store_and_the_langchain_adapter_on_it_filter_through_a_key_declared_on_the_store(dsn: str) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from ragstore.integrations.langchain import RagstoreVectorStore
    from ragstore.store import Store

    with Store(dsn, pool_size=2) as store:
        adapter = RagstoreVectorStore(DeterministicFakeEmbedding(size=8), family="lc", store=store)
        adapter.add_documents(
            [Document(page_content=f"doc {i}", metadata={"kind": "abc"[i % 3], "n": i}) for i in range(30)]
        )
        wanted = {"kind": "a", "n": {"$gte": 6}}
        before = [d.id for d in adapter.similarity_search("doc", k=30, filter=wanted)]
        store.search("lc", vector=[1.0] * 8, metadata=wanted)  # the store caches the family without keys
        fam = store.add_filter_key("lc", "kind")
        assert store.family("lc").filter_keys == ("kind",) == fam.filter_keys
        assert store.filter_keys("lc")[0].valid
        after = [d.id for d in adapter.similarity_search("doc", k=30, filter=wanted)]
        assert after == before and len(after) == 8
        with store.connection() as conn:
            cached = store.caches.family("lc")
            assert cached is not None and cached.filter_keys == ("kind",)
            assert filter_keys.index_name(cached.table, "kind") in _plan(conn, cached, {"kind": "a"})
        store.remove_filter_key("lc", "kind")
        assert store.filter_keys("lc") == []


def _index_scans(conn: Any, index: str, at_least: int, patience: float = 8.0) -> int:
    """``pg_stat_user_indexes.idx_scan`` of ``index`` once it reaches ``at_least`` (a backend reports its
    counts about a second after it goes idle), or what it is after ``patience`` seconds."""
    import time

    deadline = time.monotonic() + patience
    while True:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute("SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = %s", (index,)).fetchone()
        conn.commit()
        scans = int(row[0]) if row else 0
        if scans >= at_least or time.monotonic() > deadline:
            return scans
        time.sleep(0.2)


@pytest.mark.slow
def test_the_async_store_filters_through_a_declared_key(dsn: str, conn: Any) -> None:
    from ragstore import AsyncStore
    from tests.toolkit.store import LoopThread

    n = 2000
    fam = families.create_family(conn, "docs", OfflineBackend())
    load(conn, fam, clustered(n), metadata=[{"tag": f"t{i % 200}"} for i in range(n)])
    filter_keys.add_key(conn, "docs", "tag")
    index = filter_keys.index_name(fam.table, "tag")
    before = _index_scans(conn, index, 0, patience=0)
    loop = LoopThread()
    astore = AsyncStore(dsn, pool_size=1)
    loop.run(astore.open())
    try:
        hits = loop.run(astore.search("docs", vector=clustered(1, seed=2)[0], k=20, metadata={"tag": "t7"}))
    finally:
        loop.run(astore.close())
        loop.stop()
    assert sorted(h.chunk_id for h in hits) == [f"c{i:05d}" for i in range(7, n, 200)]
    assert _index_scans(conn, index, before + 1) > before  # the declared key's btree was read


def _hybrid_plan(conn: Any, fam: families.Family, metadata: dict[str, Any]) -> str:
    """EXPLAIN of the statement the default (hybrid) mode runs for a text query filtered by ``metadata``."""
    from ragstore.search import hybrid

    vector = clustered(1, dim=fam.dim, seed=3)[0]
    settings = hybrid.resolve_settings(fam)
    text, params, ef, iterative = hybrid.prepare(
        POSTGRES, fam, "t1 word", vector, k=10, settings=settings, weights=None,
        flt=make_filter(None, metadata), match="auto", vectors=False,
    )  # fmt: skip
    conn.commit()
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")  # a small table: show which index the planner takes
        values = drive.settings_params(params, ef_search=ef, iterative=iterative)
        rows = conn.execute(sql.SQL("EXPLAIN ") + sql.SQL(text), values).fetchall()  # type: ignore[arg-type]
    return "\n".join(r[0] for r in rows)


def test_the_default_hybrid_mode_reads_a_declared_keys_btree(conn: Any, loaded: families.Family) -> None:
    fam = loaded
    plan = _hybrid_plan(conn, fam, {"lang": "fr"})
    assert filter_keys.index_name(fam.table, "lang") in plan, plan
    undeclared = replace(fam, options={})  # the same filter without the declaration: no btree in the plan
    assert filter_keys.index_name(fam.table, "lang") not in _hybrid_plan(conn, undeclared, {"lang": "fr"})
    # and the answers are the declaration's either way
    assert search(conn, "docs", "t1 word", k=5, mode="hybrid", metadata={"lang": "fr"})
