"""The filtered plan: chosen from the planner's estimate (remembered per connection), and an iterative scan
that comes back short redone exactly over the filtered rows."""

import json

import numpy as np
import pytest

from ragstore import caches, families
from ragstore.caches import caches_for
from ragstore.embed.offline import OfflineBackend
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from ragstore.search import api, search, vector
from ragstore.search.request import make_filter
from ragstore.search.vector import RowEstimate

pytestmark = pytest.mark.usefixtures("each_storage")  # each test once per index storage


@pytest.fixture
def docs(conn, tmp_path):
    family = families.create_family(conn, "docs", OfflineBackend())
    rows = [
        {"chunk_id": f"c{i:04d}", "package_path": "small/" if i < 80 else "big/", "text": f"t {i}"} for i in range(400)
    ]
    src = tmp_path / "c.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    index_sources(conn, "docs", open_sources([str(src)]))
    conn.execute("ANALYZE ragstore.emb_docs")
    conn.commit()
    return family


def test_the_budget_is_the_row_floor_or_a_fraction_of_a_large_family():
    floor, wide = vector.FILTER_EXACT_MAX_ROWS, vector.FILTER_EXACT_MAX_ROWS_WIDE
    assert RowEstimate(rows=10, total=400).budget(16) == floor
    assert RowEstimate(rows=10, total=400).budget(384) == wide
    assert RowEstimate(rows=10, total=1_000_000).budget(16) == 20_000  # 2% of the family
    assert RowEstimate(rows=10, total=10_000_000).budget(16) == vector.SELECTIVE_MAX_ROWS


def test_the_estimate_comes_from_the_planner(conn, docs):
    small = vector.estimate_rows(conn, docs, make_filter("small/", None))
    big = vector.estimate_rows(conn, docs, make_filter("big/", None))
    assert small.total == big.total == 400  # pg_class.reltuples after ANALYZE
    assert 40 <= small.rows <= 160 and 200 < big.rows <= 400  # actual: 80 and 320
    assert vector.plan_for(conn, docs, make_filter("small/", None)) == vector.PLAN_EXACT_SUBSET


def test_a_selective_filter_on_a_large_family_goes_exact_a_wide_one_iterative(conn, docs, monkeypatch):
    # Shrink the scale: a floor of 10 rows and "selective" = at most half the family (400 rows -> 200).
    monkeypatch.setattr(vector, "FILTER_EXACT_MAX_ROWS", 10)
    monkeypatch.setattr(vector, "SELECTIVE_FRACTION", 0.5)
    assert vector.plan_for(conn, docs, make_filter("small/", None)) == vector.PLAN_EXACT_SUBSET
    assert vector.plan_for(conn, docs, make_filter("big/", None)) == vector.PLAN_ITERATIVE
    assert vector.plan_for(conn, docs, make_filter("big/", None), threshold=1000) == vector.PLAN_EXACT_SUBSET


def test_an_estimate_is_remembered_per_connection_for_a_while(conn, docs, monkeypatch):
    calls = []
    real = vector.estimate_rows
    monkeypatch.setattr(vector, "estimate_rows", lambda *a: calls.append(a[2]) or real(*a))
    small, meta = make_filter("small/", None), make_filter(None, {"b": 1, "a": 2})
    for _ in range(3):
        vector.plan_for(conn, docs, small)
        vector.plan_for(conn, docs, make_filter(None, {"a": 2, "b": 1}))  # the same filter, keys reordered
    assert calls == [small, meta]
    monkeypatch.setattr(caches, "ESTIMATE_TTL_SECONDS", 0.0)
    caches_for(conn).clear()
    vector.plan_for(conn, docs, small)
    vector.plan_for(conn, docs, small)
    assert calls == [small, meta, small, small]  # expired at once: asked again


def test_a_stale_estimate_still_returns_every_row_the_filter_keeps(conn, docs, monkeypatch):
    conn.autocommit = True
    big = make_filter("big/", None)
    monkeypatch.setattr(vector, "FILTER_EXACT_MAX_ROWS", 10)
    assert vector.plan_for(conn, docs, big) == vector.PLAN_ITERATIVE  # remembered: ~320 rows
    # The package shrinks to 3 rows; the statistics (and the remembered estimate) still say ~320.
    conn.execute("DELETE FROM ragstore.emb_docs WHERE package_path = 'big/' AND chunk_id > 'c0082'")
    exact_runs = []
    real_exact = vector.exact_subset_statement
    monkeypatch.setattr(vector, "exact_subset_statement", lambda *a, **kw: exact_runs.append(1) or real_exact(*a, **kw))
    q = np.ones(16, dtype=np.float32)
    hits = search(conn, "docs", vector=q, k=10, package="big/")
    assert sorted(h.chunk_id for h in hits) == ["c0080", "c0081", "c0082"]
    assert vector.plan_for(conn, docs, big) == vector.PLAN_ITERATIVE  # the plan was the iterative scan
    assert exact_runs == [1]  # which came back with 3 < 10 rows, so the search was redone exactly
    assert search(conn, "docs", vector=q, k=10, package="nothing/") == []  # no row passes: an answer


def _clustered(n, dim=16, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(20, dim))
    return (centers[rng.integers(0, 20, n)] + 0.3 * rng.normal(size=(n, dim))).astype(np.float32)


@pytest.mark.slow
def test_an_iterative_scan_that_comes_back_short_is_answered_exactly(conn):
    from ragstore.families.storage_migrate import migrate_storage
    from tests.toolkit.search import load

    family = families.create_family(conn, "vecs", OfflineBackend())
    n = 3000
    load(conn, family, _clustered(n), packages=[f"pkg/{i % 100:02d}/doc" for i in range(n)])
    if family.storage == "bit":
        # k candidates, not k x 10: a 16-bit code is shared by many rows, one index element holds up to 10
        # of them, so 100 elements at a 1% filter would pass about 10 rows and the cap below would not show.
        migrate_storage(conn, "vecs", "bit", rerank_factor=1)
        family = families.get_family(conn, "vecs")
    conn.execute(f"DROP INDEX ragstore.{family.package_index}")  # else the planner serves 30 rows by the btree
    conn.commit()
    conn.autocommit = True
    conn.execute("SET enable_seqscan = off")  # nor by reading 3,000 rows: the HNSW index it is
    flt = make_filter("pkg/07/", None)  # 1%: 30 rows
    q = _clustered(1, seed=5)[0]
    truth = [h.chunk_id for h in api.run_vector(conn, family, q, k=10, flt=flt, exact=True)]

    def scan_only():
        return vector.hnsw_hits(conn, family, q, k=10, flt=flt, ef_search=10, iterative=True, vectors=False)

    assert len(scan_only()) == 10  # relaxed_order keeps scanning until 10 rows pass
    # pgvector stops an iterative scan after hnsw.max_scan_tuples index tuples: at 50, ~0.5 of them pass.
    conn.execute("SET hnsw.max_scan_tuples = 50")
    assert len(scan_only()) < 10
    forced = api.run_vector(conn, family, q, k=10, flt=flt, plan=vector.PLAN_ITERATIVE, ef_search=10)
    assert [h.chunk_id for h in forced] == truth
    assert all(h.vector is not None for h in forced)
    bare = api.run_vector(conn, family, q, k=10, flt=flt, plan=vector.PLAN_ITERATIVE, ef_search=10, vectors=False)
    assert [h.chunk_id for h in bare] == truth and all(h.vector is None for h in bare)
