# ruff: noqa: F811  (the fixtures imported below are arguments of the tests)
"""search(): contracts, ordering, the HNSW/exact paths and settings hygiene, against a real Postgres."""

import math

import numpy as np
import pytest

from ragstore import families
from ragstore.caches import caches_for
from ragstore.embed.offline import OfflineBackend, fingerprint
from ragstore.errors import InvalidInput, ModelMismatch, NotFound, RagstoreError
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.run import write_records
from ragstore.search import api, drive, exact, plan, search
from ragstore.search import vector as vec
from ragstore.search.mmr import mmr
from ragstore.search.request import DEFAULT_EF_SEARCH, MAX_EF_SEARCH, Filter, ef_search_for
from tests.fix_storage import exhaustive_rerank
from tests.toolkit.search import (
    clustered,
    family,  # noqa: F401  (fixtures)
    load,
)

pytestmark = pytest.mark.usefixtures("each_storage")  # each test once per index storage


class OtherBackend(OfflineBackend):
    @property
    def model(self) -> str:
        return "another-model"


def test_hits_carry_text_metadata_citation_in_score_then_id_order(conn, family):
    load(conn, family, clustered(200), metadata=[{"n": i} for i in range(200)])
    exhaustive_rerank(conn, "docs")  # bit: MMR's wider fetch would otherwise find more of the exact top 10
    q = clustered(1, seed=9)[0]
    hits = search(conn, "docs", vector=q, k=10)
    assert len(hits) == 10
    keys = [(-h.score, h.chunk_id) for h in hits]
    assert keys == sorted(keys)
    top = hits[0]
    assert top.text == f"text of {top.chunk_id}" and top.metadata == {"n": int(top.chunk_id[1:])}
    assert top.citation == f"[pkg/a#{top.chunk_id}]" and top.vector is None  # vectors only when asked for
    with_vectors = search(conn, "docs", vector=q, k=10, rerank="mmr", mmr_lambda=1.0)
    assert with_vectors == hits and all(h.vector is not None and h.vector.shape == (16,) for h in with_vectors)
    assert np.allclose(with_vectors[0].vector, clustered(200)[int(top.chunk_id[1:])])


def test_text_query_is_embedded_with_the_family_backend(conn, family):
    texts = ["alpha beta", "gamma delta", "epsilon"]
    records = [(str(i), ChunkRecord(chunk_id=f"t{i}", package_path="p", text=t)) for i, t in enumerate(texts)]
    write_records(conn, family, OfflineBackend(), records)
    by_text = search(conn, "docs", "gamma delta", k=3, mode="hnsw")
    by_vector = search(conn, "docs", vector=fingerprint(["gamma delta"])[0], k=3)
    assert by_text == by_vector and by_text[0].chunk_id == "t1" and math.isclose(by_text[0].score, 1.0, abs_tol=1e-6)


def _explain(conn, family, flt, q, *, ef=100, iterative=False):
    params = {
        **flt.params(),
        "q": q,
        "ragstore_ef": str(ef),
        "ragstore_iterative": "relaxed_order" if iterative else "off",
    }
    statement = "EXPLAIN " + vec.hnsw_statement(family, flt, 10)
    return "\n".join(r[0] for r in conn.execute(statement, params))


@pytest.mark.slow
def test_hnsw_statement_uses_the_hnsw_index(conn, family):
    load(conn, family, clustered(3000))
    q = family.query_param(clustered(1, seed=3)[0])
    plan = _explain(conn, family, Filter(), q)
    assert family.hnsw_index in plan, plan


# Settings are made INSIDE the statement, the way the hnsw block makes them.
SETTINGS = "SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')"
PROBE = vec.sql.SQL(
    SETTINGS + " FROM (SELECT set_config('hnsw.ef_search', %(ragstore_ef)s, true)"
    " || set_config('hnsw.iterative_scan', %(ragstore_iterative)s, true) AS s) AS s WHERE s.s IS NOT NULL"
)


def test_settings_are_transaction_local_and_never_leak(conn, family):
    load(conn, family, clustered(300))
    before = conn.execute(SETTINGS).fetchone()  # the caller now holds a transaction open
    inside = drive.run_with_settings(conn, PROBE, {}, ef_search=150, iterative=True)
    search(conn, "docs", vector=clustered(1)[0], k=150, ef_search=20)
    search(conn, "docs", vector=clustered(1)[0], k=5, ef_search=300)  # cached family
    api.run_vector(conn, family, clustered(1)[0], k=5, flt=Filter("pkg/"), plan=vec.PLAN_ITERATIVE, ef_search=30)
    assert inside == [("150", "relaxed_order")]
    assert conn.execute(SETTINGS).fetchone() == before and conn.info.transaction_status.name == "INTRANS"
    conn.commit()
    conn.autocommit = True
    assert drive.run_with_settings(conn, PROBE, {}, ef_search=64, iterative=False) == [("64", "off")]
    search(conn, "docs", vector=clustered(1)[0], k=7, ef_search=64)
    search(conn, "docs", vector=clustered(1)[0], k=7, ef_search=65)
    api.run_vector(conn, family, clustered(1)[0], k=5, flt=Filter("pkg/"), plan=vec.PLAN_ITERATIVE, ef_search=30)
    assert conn.execute(SETTINGS).fetchone() == before and conn.info.transaction_status.name == "IDLE"


@pytest.mark.slow
def test_the_statement_applies_its_own_ef_search_and_iterative_scan(conn, family):
    if family.storage == "bit":  # bit reads k x its rerank factor candidates: 1 leaves the scan ef_search wide
        from ragstore.families.storage_migrate import migrate_storage

        migrate_storage(conn, "docs", "bit", rerank_factor=1)
        family = families.get_family(conn, "docs")
    n = 3000
    load(conn, family, clustered(n), packages=[f"pkg/{i % 100:02d}/doc" for i in range(n)])
    conn.execute(f"DROP INDEX ragstore.{family.package_index}")  # leave the planner the HNSW index only
    conn.commit()
    conn.autocommit = True
    conn.execute("SET enable_seqscan = off")
    flt = Filter("pkg/0")  # 10% of the rows
    q = clustered(1, seed=5)[0]
    assert family.hnsw_index in _explain(conn, family, flt, family.query_param(q))

    def found(ef, iterative):
        return len(vec.hnsw_hits(conn, family, q, k=10, flt=flt, ef_search=ef, iterative=iterative))

    # plain HNSW filters its ef_search candidates afterwards: ~10% of 10 pass, ~10% of 1000 fill k
    assert found(10, False) < 10 and found(1000, False) == 10
    assert found(10, True) == 10  # relaxed_order keeps scanning until k pass


def test_a_cached_family_is_rechecked_when_the_family_changes(conn, family):
    load(conn, family, clustered(50))
    conn.autocommit = True
    q = clustered(1, seed=1)[0]
    assert len(search(conn, "docs", vector=q, k=3)) == 3  # now cached
    families.drop_family(conn, "docs")
    with pytest.raises(NotFound, match="no family named 'docs'"):
        search(conn, "docs", vector=q, k=3)
    other = families.create_family(conn, "docs", OfflineBackend(), table="emb_docs_again")
    load(conn, other, clustered(5, seed=2), ids=[f"n{i}" for i in range(5)])
    assert {h.chunk_id for h in search(conn, "docs", vector=q, k=3)} <= {f"n{i}" for i in range(5)}


def test_a_search_after_a_model_migration_swapped_the_table_re_reads_the_family(conn, dsn, family):
    from ragstore.db.connection import connect
    from ragstore.families.migrate import migrate_family
    from tests.toolkit.family_migrate import HashBackend

    load(conn, family, clustered(40))
    conn.autocommit = True
    q = clustered(1, seed=1)[0]
    before = search(conn, "docs", vector=q, k=5)  # the family (and its table name) is now cached
    assert len(before) == 5
    with connect(dsn) as other:  # another session migrates: new table, old one dropped at the swap
        migrate_family(other, "docs", HashBackend(model="hash-b", dim=16))
    old_table = conn.execute("SELECT to_regclass(%s)", (f"ragstore.{family.table}",)).fetchone()
    assert old_table == (None,)
    after = search(conn, "docs", vector=q, k=5)  # the same connection: re-reads, runs on the new table
    assert len(after) == 5 and caches_for(conn).family("docs").model == "hash-b"
    filtered = search(conn, "docs", vector=q, k=5, package="pkg/")
    assert [h.chunk_id for h in filtered] == [h.chunk_id for h in after]


def test_a_swap_between_the_family_lookup_and_the_statement_is_retried_once(conn, family, monkeypatch):
    load(conn, family, clustered(40))
    conn.autocommit = True
    q = clustered(1, seed=1)[0]
    expected = [h.chunk_id for h in search(conn, "docs", vector=q, k=5, mode="exact")]
    stale = families.get_family(conn, "docs")
    # Simulate the swap through the registry: the table gets a new name, the old name is gone.
    conn.execute(f"ALTER TABLE ragstore.{family.table} RENAME TO emb_docs_v2")
    conn.execute("UPDATE ragstore.families SET table_name = 'emb_docs_v2' WHERE name = 'docs'")
    reads = []
    real = plan.read_family

    def first_stale(name, memo):  # the first lookup returns what it read just before the swap
        reads.append(name)
        if len(reads) == 1:
            return stale
        return (yield from real(name, memo))

    monkeypatch.setattr(plan, "read_family", first_stale)
    for kwargs in ({"package": "pkg/"}, {"mode": "exact"}, {}):
        reads.clear()
        caches_for(conn).clear()
        got = [h.chunk_id for h in search(conn, "docs", vector=q, k=5, **kwargs)]
        assert got == expected and len(reads) == 2, kwargs
    reads.clear()

    def counted(name, memo):
        reads.append(name)
        return (yield from real(name, memo))

    monkeypatch.setattr(plan, "read_family", counted)
    caches_for(conn).clear()
    caches_for(conn).remember_family(stale)  # a stale cache entry: the hot path falls back, reads once
    assert [h.chunk_id for h in search(conn, "docs", vector=q, k=5)] == expected and reads == ["docs"]


def test_a_filtered_search_on_a_stale_cached_family_inside_a_transaction_recovers(conn, family):
    load(conn, family, clustered(40))
    q = clustered(1, seed=1)[0]
    expected = [h.chunk_id for h in search(conn, "docs", vector=q, k=5, package="pkg/")]  # cached now
    stale = caches_for(conn).family("docs")
    conn.execute(f"ALTER TABLE ragstore.{family.table} RENAME TO emb_docs_v2")
    conn.execute("UPDATE ragstore.families SET table_name = 'emb_docs_v2' WHERE name = 'docs'")
    assert caches_for(conn).family("docs") is stale and conn.info.transaction_status.name == "INTRANS"
    # The estimate and the statement on the cached family fail inside savepoints; the search re-reads the
    # family and answers, and the caller's transaction (holding the rename) is intact.
    assert [h.chunk_id for h in search(conn, "docs", vector=q, k=5, package="pkg/")] == expected
    assert conn.info.transaction_status.name == "INTRANS"
    # Again with no estimate remembered: the EXPLAIN on the stale table fails first, isolated as well.
    caches_for(conn).remember_family(stale)
    caches_for(conn).clear()
    assert [h.chunk_id for h in search(conn, "docs", vector=q, k=5, package="pkg/")] == expected
    assert conn.info.transaction_status.name == "INTRANS"
    assert conn.execute("SELECT count(*) FROM ragstore.emb_docs_v2").fetchone() == (40,)


def test_a_changed_family_that_still_fails_is_not_retried_forever(conn, family):
    load(conn, family, clustered(10))
    conn.autocommit = True
    conn.execute("UPDATE ragstore.families SET table_name = 'emb_gone' WHERE name = 'docs'")
    with pytest.raises(RagstoreError, match="emb_gone"):
        search(conn, "docs", vector=clustered(1)[0], k=3)


def test_ef_search_is_at_least_k():
    assert ef_search_for(150, 20) == 150
    assert ef_search_for(5, None) == DEFAULT_EF_SEARCH
    assert ef_search_for(5000, None) == MAX_EF_SEARCH


def test_a_failing_statement_leaves_the_connection_usable(conn, family):
    probe = vec.sql.SQL("SELECT 1 / 0")
    with pytest.raises(InvalidInput):
        drive.run_with_settings(conn, probe, {}, ef_search=10, iterative=False)
    assert conn.execute("SELECT 1").fetchone() == (1,) and conn.info.transaction_status.name == "INTRANS"
    conn.rollback()
    conn.autocommit = True
    with pytest.raises(InvalidInput):
        drive.run_with_settings(conn, probe, {}, ef_search=10, iterative=False)
    assert conn.execute(SETTINGS).fetchone()[0] == "40" and conn.info.transaction_status.name == "IDLE"


@pytest.mark.slow
def test_filtered_search_returns_k_hits_on_both_plans_and_matches_exact(conn, family, monkeypatch):
    n = 3000
    packages = [f"pkg/{i % 100:02d}/doc" for i in range(n)]  # 1% each
    load(conn, family, clustered(n), packages=packages)
    q = clustered(1, seed=5)[0]
    flt = Filter("pkg/07/")
    truth = exact.exact_hits(conn, family, q, k=10, flt=flt)
    conn.rollback()
    assert vec.plan_for(conn, family, flt) == vec.PLAN_EXACT_SUBSET
    small = search(conn, "docs", vector=q, k=10, package="pkg/07/")
    forced = api.run_vector(conn, family, q, k=10, flt=flt, plan=vec.PLAN_ITERATIVE)
    assert vec.plan_for(conn, family, flt, threshold=5) == vec.PLAN_ITERATIVE
    assert [h.chunk_id for h in small] == [h.chunk_id for h in truth]
    assert len(forced) == 10 and all(h.package_path.startswith("pkg/07/") for h in forced)
    assert len({h.chunk_id for h in forced} & {h.chunk_id for h in truth}) >= 9


def test_package_prefix_escapes_like_wildcards(conn, family):
    load(conn, family, clustered(4), packages=["a_b/x", "aXb/x", "a%b/y", "a\\b/z"])
    assert [h.package_path for h in search(conn, "docs", vector=clustered(1)[0], package="a_b")] == ["a_b/x"]
    assert [h.package_path for h in search(conn, "docs", vector=clustered(1)[0], package="a%")] == ["a%b/y"]
    assert [h.package_path for h in search(conn, "docs", vector=clustered(1)[0], package="a\\")] == ["a\\b/z"]


def test_metadata_containment_filters_on_every_path(conn, family):
    meta = [{"lang": "en" if i % 3 else "fr", "n": i} for i in range(60)]
    load(conn, family, clustered(60), metadata=meta)
    q = clustered(1, seed=2)[0]
    for mode in ("hnsw", "exact"):
        hits = search(conn, "docs", vector=q, k=50, metadata={"lang": "fr"}, mode=mode)
        assert len(hits) == 20 and all(h.metadata["lang"] == "fr" for h in hits)
    forced = api.run_vector(conn, family, q, k=50, flt=Filter(metadata={"lang": "fr"}), plan=vec.PLAN_ITERATIVE)
    assert {h.chunk_id for h in forced} == {f"c{i:05d}" for i in range(0, 60, 3)}


def test_equal_scores_order_by_chunk_id_on_hnsw_and_exact(conn, family):
    v = np.ones((6, 16), dtype=np.float32)
    load(conn, family, v, ids=["f", "b", "e", "a", "d", "c"])
    for mode in ("hnsw", "exact"):
        assert [h.chunk_id for h in search(conn, "docs", vector=v[0], k=4, mode=mode)] == ["a", "b", "c", "d"]
    assert [h.chunk_id for h in search(conn, "docs", vector=v[0], k=4, package="pkg")] == ["a", "b", "c", "d"]


def test_zero_query_and_zero_rows_score_zero(conn, family):
    v = clustered(5)
    load(conn, family, v)
    conn.execute("UPDATE ragstore.emb_docs SET embedding = array_fill(0, ARRAY[16])::vector WHERE chunk_id = 'c00002'")
    conn.commit()
    for mode in ("hnsw", "exact"):
        hits = search(conn, "docs", vector=np.zeros(16), k=3, mode=mode)
        assert [(h.chunk_id, h.score) for h in hits] == [("c00000", 0.0), ("c00001", 0.0), ("c00002", 0.0)]
    for hits in (
        search(conn, "docs", vector=v[0], k=5, mode="exact"),
        search(conn, "docs", vector=v[0], k=5, package="pkg"),
    ):
        scores = {h.chunk_id: h.score for h in hits}
        assert scores["c00002"] == 0.0 and all(math.isfinite(s) for s in scores.values())


def test_streaming_with_tiny_batches_equals_one_batch_byte_for_byte(conn, family):
    v = clustered(500)
    v[100:110] = v[5]  # ties
    load(conn, family, v)
    q = v[5]
    with conn.transaction():
        tiny = exact.exact_hits(conn, family, q, k=25, flt=Filter(), batch_size=3)
        whole = exact.exact_hits(conn, family, q, k=25, flt=Filter(), batch_size=100_000)
    assert [(h.chunk_id, h.score.hex()) for h in tiny] == [(h.chunk_id, h.score.hex()) for h in whole]
    assert [h.chunk_id for h in tiny[:11]] == sorted(["c00005", *[f"c{i:05d}" for i in range(100, 110)]])


@pytest.mark.slow
def test_hnsw_agrees_with_exact_on_a_small_family(conn, family):
    load(conn, family, clustered(1000))
    exhaustive_rerank(conn, "docs")
    for seed in range(5):
        q = clustered(1, seed=100 + seed)[0]
        assert [h.chunk_id for h in search(conn, "docs", vector=q)] == [
            h.chunk_id for h in search(conn, "docs", vector=q, mode="exact")
        ]


def test_min_score_drops_lower_hits_and_mmr_reranks_fetch_k(conn, family):
    load(conn, family, clustered(200))
    q = clustered(1, seed=4)[0]
    full = search(conn, "docs", vector=q, k=50)
    floor = full[5].score
    assert search(conn, "docs", vector=q, k=50, min_score=floor) == [h for h in full if h.score >= floor]
    reranked = search(conn, "docs", vector=q, k=5, rerank="mmr", mmr_lambda=0.3, fetch_k=50)
    relevance = search(conn, "docs", vector=q, k=50, rerank="mmr", mmr_lambda=1.0, fetch_k=50)
    assert relevance == full  # lambda 1 is the relevance order
    assert reranked == mmr(relevance, 5, 0.3) and reranked != full[:5]


def test_empty_family_returns_nothing(conn, family):
    assert search(conn, "docs", vector=np.ones(16), k=3) == []
    assert search(conn, "docs", vector=np.ones(16), k=3, mode="exact") == []
    assert search(conn, "docs", vector=np.ones(16), k=3, package="x") == []


@pytest.mark.parametrize("k", [0, -1, True, 2.5, "3"])
def test_k_must_be_a_positive_integer(conn, family, k):
    with pytest.raises(InvalidInput, match="k must be a positive integer"):
        search(conn, "docs", vector=np.ones(16), k=k)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, "0.5"])
def test_min_score_must_be_finite(conn, family, bad):
    with pytest.raises(InvalidInput, match="min_score"):
        search(conn, "docs", vector=np.ones(16), min_score=bad)


def test_unknown_family_and_mismatched_spaces_are_refused(conn, family):
    with pytest.raises(NotFound, match="no family named 'nope'"):
        search(conn, "nope", vector=np.ones(16))
    with pytest.raises(ModelMismatch, match="17 dimensions"):
        search(conn, "docs", vector=np.ones(17))
    with pytest.raises(ModelMismatch, match="another-model"):
        search(conn, "docs", "some text", backend=OtherBackend())
    with pytest.raises(InvalidInput, match="exactly one"):
        search(conn, "docs", "text", vector=np.ones(16))
    with pytest.raises(InvalidInput, match="exactly one"):
        search(conn, "docs")
    with pytest.raises(InvalidInput, match="non-finite"):
        search(conn, "docs", vector=[math.nan] * 16)
    with pytest.raises(InvalidInput, match="mode"):
        search(conn, "docs", vector=np.ones(16), mode="fast")


def test_fts_and_hybrid_modes_delegate_to_the_hybrid_module_with_the_filters(conn, family):
    texts = ["rotate the signing keys", "rotate disks weekly", "queues and workers", "signing keys in vaults"]
    records = [
        (str(i), ChunkRecord(chunk_id=f"t{i}", package_path=f"pkg/{i % 2}", text=t, metadata={"n": i}))
        for i, t in enumerate(texts)
    ]
    write_records(conn, family, OfflineBackend(), records)
    conn.commit()
    from ragstore.search.fts import fts_search

    fts = search(conn, "docs", "signing keys", k=5, mode="fts")
    assert {h.chunk_id for h in fts} == {"t0", "t3"} and fts == fts_search(conn, family, "signing keys", k=5)
    assert [h.chunk_id for h in search(conn, "docs", "signing keys", k=5, mode="fts", package="pkg/1")] == ["t3"]
    both = search(conn, "docs", "signing keys", k=3, mode="hybrid", metadata={"n": 0})
    assert [h.chunk_id for h in both] == ["t0"] and both[0].ranks["fts"] == 1 and both[0].ranks["vector"] == 1
    with pytest.raises(InvalidInput, match="needs a query text"):
        search(conn, "docs", vector=np.ones(16), mode="fts")


def test_exact_search_in_a_read_committed_transaction_is_never_short_when_a_winner_is_pruned(
    conn, dsn, family, monkeypatch
):
    """Inside a caller's transaction the exact scan and the fetch of its winners are two snapshots: a winner
    deleted between them (a concurrent prune) must not leave the answer short."""
    from ragstore.db.connection import connect

    vectors = clustered(60)
    ids = load(conn, family, vectors)
    query = vectors[0]
    winner = ids[0]  # its own vector: the best hit
    real_stream = exact.stream_batches
    calls = []

    def stream_then_prune(*args, **kwargs):
        yield from real_stream(*args, **kwargs)
        calls.append(1)
        if len(calls) == 1:  # after the first scan, before the fetch: another session prunes the winner
            with connect(dsn, autocommit=True) as other:
                other.execute("DELETE FROM ragstore.chunks WHERE family = 'docs' AND chunk_id = %s", (winner,))

    monkeypatch.setattr(exact, "stream_batches", stream_then_prune)
    conn.execute("SELECT 1")  # a READ COMMITTED transaction is open: the search is not top level
    hits = search(conn, "docs", vector=query, k=10, mode="exact")
    conn.rollback()
    assert len(hits) == 10 and winner not in [h.chunk_id for h in hits]
    assert len(calls) == 2  # the scan ran again once
