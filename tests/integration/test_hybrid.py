# ruff: noqa: F811  (the fixtures imported below are arguments of the tests)
"""Hybrid search with RRF fusion: one SQL statement, pinned by hand and against ragstore.search.fusion.fuse;
filters on both legs. (Convex combination, the default fusion: test_fusion.py.)"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from ragstore.embed.offline import OfflineBackend
from ragstore.errors import InvalidInput, ModelMismatch
from ragstore.search.fts import fts_search
from ragstore.search.fusion import Candidate, FusionSettings, fuse
from ragstore.search.hybrid import blended_search, hybrid_search, parse_weights
from tests.toolkit.hybrid import (
    CHUNKS,
    QUERY,
    family,  # noqa: F401  (fixtures)
)

pytestmark = pytest.mark.usefixtures("each_storage")  # each test once per index storage

RRF = FusionSettings(fusion="rrf")


# The query vector is e1. Cosines: c 1.0, a 0.8, d 0.0, b -1.0 -> vector leg c, a, d, b.
# Full text for "apple" (BM25): a holds it twice, b once -> fts leg a, b.


def test_rrf_in_sql_matches_the_hand_computed_example_including_one_leg_hits(conn: Any, family: Any) -> None:
    hits = hybrid_search(conn, family, "apple", QUERY, settings=RRF, k=10, per_leg=2)
    assert [h.chunk_id for h in hits] == ["a", "c", "b"]  # d is in neither leg's top 2
    assert hits[0].score == 1 / 61 + 1 / 62
    assert hits[1].score == 1 / 61
    assert hits[2].score == 1 / 62
    assert hits[0].ranks == {"fts": 1, "vector": 2}
    assert hits[1].ranks == {"fts": None, "vector": 1}
    assert hits[2].ranks == {"fts": 2, "vector": None}
    assert hits[1].scores["fts"] is None and hits[1].scores["vector"] == pytest.approx(1.0)
    assert hits[2].scores["vector"] is None and hits[2].scores["fts"] is not None
    assert hits[0].scores["fts"] > hits[2].scores["fts"]  # type: ignore[operator]
    assert hits[0].vector is not None and hits[0].vector.shape == (16,)


@pytest.mark.parametrize("weights", [None, {"fts": 0.5}, {"fts": 0.0, "vector": 2.0}, {"vector": 0.25}])
@pytest.mark.parametrize("rrf_k", [1, 60])
def test_rrf_in_sql_equals_the_python_reference(conn: Any, family: Any, weights: Any, rrf_k: int) -> None:
    fts = [h.chunk_id for h in fts_search(conn, family, "apple", k=3)]
    vec = ["c", "a", "d"]
    hits = hybrid_search(conn, family, "apple", QUERY, settings=RRF, k=10, per_leg=3, rrf_k=rrf_k, weights=weights)
    ranks = {cid: {"fts": _rank(fts, cid), "vector": _rank(vec, cid)} for cid in {*fts, *vec}}
    candidates = [Candidate(cid, r["fts"], r["vector"], 0.0, 0.0) for cid, r in ranks.items()]
    expected = fuse(candidates, FusionSettings(fusion="rrf", rrf_k=rrf_k, per_leg=3), weights)
    assert [(h.chunk_id, h.score, h.ranks) for h in hits] == [(cid, score, ranks[cid]) for cid, score in expected]


def _rank(leg: list[str], chunk_id: str) -> int | None:
    return leg.index(chunk_id) + 1 if chunk_id in leg else None


def test_k_cuts_the_fused_list_after_ordering(conn: Any, family: Any) -> None:
    hits = hybrid_search(conn, family, "apple", QUERY, settings=RRF, k=1, per_leg=2)
    assert [h.chunk_id for h in hits] == ["a"]


def test_a_vector_leg_chunk_whose_text_changed_is_left_out_keeping_its_rank_and_k_is_filled(
    conn: Any, family: Any
) -> None:
    before = hybrid_search(conn, family, "apple", QUERY, settings=RRF, k=10, per_leg=4)
    assert [h.chunk_id for h in before] == ["a", "b", "c", "d"]
    # c (the vector leg's first) gets a new text behind the writer's back: its vector no longer embeds it.
    conn.execute(
        "UPDATE ragstore.chunks SET text = 'grape juice', content_sha256 = sha256('grape juice') "
        "WHERE family = 'docs' AND chunk_id = 'c'"
    )
    kept = [(h.chunk_id, h.score, h.ranks, h.cosine) for h in before if h.chunk_id != "c"]
    for k in (3, 10):  # the best k served chunks: the walk goes past c to fill k
        hits = hybrid_search(conn, family, "apple", QUERY, settings=RRF, k=k, per_leg=4)
        assert [(h.chunk_id, h.score, h.ranks, h.cosine) for h in hits] == kept  # a keeps vector rank 2


def test_package_filter_applies_to_both_legs(conn: Any, family: Any) -> None:
    hits = hybrid_search(conn, family, "apple", QUERY, settings=RRF, k=10, per_leg=4, package="p1/")
    assert {h.chunk_id for h in hits} == {"a", "c"}
    by_id = {h.chunk_id: h.ranks for h in hits}
    assert by_id["a"] == {"fts": 1, "vector": 2}  # b (fts) is filtered out, not just cut
    assert by_id["c"] == {"fts": None, "vector": 1}


def test_package_prefix_wildcards_are_literal(conn: Any, family: Any) -> None:
    assert hybrid_search(conn, family, "apple", QUERY, settings=RRF, k=10, package="p_") == []
    assert fts_search(conn, family, "apple", k=10, package="%") == []


def test_metadata_filter_applies_to_both_legs(conn: Any, family: Any) -> None:
    hits = hybrid_search(conn, family, "apple", QUERY, settings=RRF, k=10, per_leg=4, metadata={"lang": "en"})
    assert {h.chunk_id: h.ranks for h in hits} == {
        "b": {"fts": 1, "vector": 2},
        "d": {"fts": None, "vector": 1},
    }


def test_zero_query_vector_leaves_the_full_text_order(conn: Any, family: Any) -> None:
    hits = hybrid_search(conn, family, "apple", np.zeros(16, dtype=np.float32), settings=RRF, k=10)
    assert [h.chunk_id for h in hits] == ["a", "b"]
    assert all(h.ranks["vector"] is None for h in hits)


def test_query_vector_of_another_dimension_is_refused(conn: Any, family: Any) -> None:
    with pytest.raises(ModelMismatch):
        hybrid_search(conn, family, "apple", np.ones(8, dtype=np.float32), settings=RRF, k=3)


@pytest.mark.parametrize(
    "options",
    [{"k": 0}, {"k": 3, "per_leg": 0}, {"k": 3, "per_leg": 1001}, {"k": 3, "rrf_k": 0}, {"k": 3, "weights": {"x": 1}}],
)
def test_bad_options_are_refused(conn: Any, family: Any, options: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        hybrid_search(conn, family, "apple", QUERY, settings=RRF, **options)


def test_negative_weight_is_refused(conn: Any, family: Any) -> None:
    with pytest.raises(InvalidInput, match="non-negative"):
        hybrid_search(conn, family, "apple", QUERY, settings=RRF, k=3, weights={"fts": -1})
    with pytest.raises(InvalidInput):
        parse_weights("fts=abc")
    assert parse_weights("fts=0.5, vector=1") == {"fts": 0.5, "vector": 1.0}


def test_settings_do_not_leak_and_an_open_transaction_survives(conn: Any, family: Any) -> None:
    before = conn.execute("SHOW hnsw.ef_search").fetchone()[0]
    conn.rollback()
    hybrid_search(conn, family, "apple", QUERY, settings=RRF, k=3, per_leg=500)
    assert conn.execute("SHOW hnsw.ef_search").fetchone()[0] == before


def test_api_search_hybrid_and_fts_go_through_these_functions(conn: Any, family: Any) -> None:
    from ragstore.search.api import search

    class Fixed(OfflineBackend):
        def embed(self, texts: Any) -> Any:
            return np.stack([QUERY for _ in texts])

    got = search(conn, "docs", "apple", k=10, mode="hybrid", backend=Fixed())
    assert [h.chunk_id for h in got] == [h.chunk_id for h in hybrid_search(conn, family, "apple", QUERY, k=10)]
    assert [h.chunk_id for h in search(conn, "docs", "apple", k=10, mode="fts")] == ["a", "b"]


def test_hybrid_hits_carry_their_vector_only_when_mmr_reads_it(conn: Any, family: Any) -> None:
    from ragstore.caches import Caches
    from ragstore.search.api import search

    class Fixed(OfflineBackend):
        def embed(self, texts: Any) -> Any:
            return np.stack([QUERY for _ in texts])

    memo = Caches()
    fresh = search(conn, "docs", "apple", k=10, mode="hybrid", backend=Fixed(), caches=memo)
    assert memo.family("docs") is not None  # the next search takes the remembered family's path
    remembered = search(conn, "docs", "apple", k=10, mode="hybrid", backend=Fixed(), caches=memo)
    assert fresh == remembered and len(fresh) == len(CHUNKS)
    assert all(h.vector is None and h.cosine is not None for h in fresh)
    diverse = search(conn, "docs", "apple", k=3, mode="hybrid", rerank="mmr", backend=Fixed(), caches=memo)
    assert diverse and all(h.vector is not None and h.vector.shape == (16,) for h in diverse)


def test_blended_ranking_reranks_every_candidate_with_normalised_signals(conn: Any, family: Any) -> None:
    now = datetime(2100, 1, 1, tzinfo=UTC)
    hits = blended_search(conn, family, "apple", QUERY, k=10, now=now, per_leg=4)
    assert {h.chunk_id for h in hits} == {"a", "b", "c", "d"}
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    top = hits[0]
    assert top.chunk_id == "a"  # the only chunk strong on both the semantic and the lexical signal
    assert all(0.0 <= v <= 1.0 for h in hits for v in h.scores.values() if v is not None)
    assert next(h for h in hits if h.chunk_id == "b").scores["semantic"] == 0.0  # cosine -1, under the floor
