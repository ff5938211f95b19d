"""Convex-combination fusion in SQL equals the numpy reference (ragstore.search.fusion.fuse), for every
normalisation; a family's stored settings are what search() runs; per-call overrides win."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ragstore import families
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import InvalidInput
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.run import write_records
from ragstore.search.fusion import DEFAULT_FUSION, NORMALIZATIONS, FusionSettings, fuse, settings_of, store_settings
from ragstore.search.hybrid import fusion_candidates, hybrid_search

pytestmark = pytest.mark.usefixtures("each_storage")  # each test once per index storage


def vec(*xy: float) -> list[float]:
    v = np.zeros(16, dtype=np.float32)
    v[: len(xy)] = xy
    return [float(x) for x in v]


TEXTS = [
    ("a", "apple apple banana", vec(0.8, 0.6)),
    ("b", "apple cherry", vec(-1.0)),
    ("c", "grape", vec(1.0)),
    ("d", "melon apple pie", vec(0.0, 1.0)),
    ("e", "apple", vec(0.3, -0.9)),
    ("f", "banana split", vec(0.6, 0.8)),
    ("g", "kiwi apple kiwi", vec(0.9, 0.1)),
]
QUERY = np.asarray(vec(1.0, 0.2), dtype=np.float32)


@pytest.fixture
def family(conn: Any) -> families.Family:
    backend = OfflineBackend()
    fam = families.create_family(conn, "docs", backend)
    records = [
        (f"t:{i}", ChunkRecord(chunk_id=cid, package_path="p/x", text=text, vector=v))
        for i, (cid, text, v) in enumerate(TEXTS)
    ]
    write_records(conn, fam, backend, records)
    return fam


@pytest.mark.parametrize("normalization", NORMALIZATIONS)
@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.7, 1.0])
@pytest.mark.parametrize("per_leg", [2, 3, 7])
def test_cc_in_sql_equals_the_numpy_reference(
    conn: Any, family: Any, normalization: str, alpha: float, per_leg: int
) -> None:
    settings = FusionSettings(fusion="cc", normalization=normalization, alpha=alpha, per_leg=per_leg)
    hits = hybrid_search(conn, family, "apple banana", QUERY, k=20, settings=settings)
    cands = fusion_candidates(conn, family, "apple banana", QUERY, per_leg=7)
    expected = fuse(cands, settings)
    assert [h.chunk_id for h in hits] == [cid for cid, _ in expected]
    assert [h.score for h in hits] == pytest.approx([score for _, score in expected], abs=1e-9)
    for hit in hits:  # per-leg ranks and scores on every hit, None for the leg that missed it
        assert set(hit.ranks) == {"fts", "vector"} and set(hit.scores) == {"fts", "vector"}
        assert (hit.ranks["fts"] is None) == (hit.scores["fts"] is None)
        assert (hit.ranks["vector"] is None) == (hit.scores["vector"] is None)


def test_deeper_candidates_fused_at_a_smaller_depth_equal_a_search_at_that_depth(conn: Any, family: Any) -> None:
    deep = fusion_candidates(conn, family, "apple", QUERY, per_leg=7)
    for n in (1, 2, 4):
        settings = FusionSettings(per_leg=n)
        got = [h.chunk_id for h in hybrid_search(conn, family, "apple", QUERY, k=20, settings=settings)]
        assert got == [cid for cid, _ in fuse(deep, settings)]


def test_alpha_one_is_the_vector_order_and_alpha_zero_the_full_text_order(conn: Any, family: Any) -> None:
    dense = hybrid_search(conn, family, "apple", QUERY, k=3, settings=FusionSettings(alpha=1.0, per_leg=7))
    assert [h.ranks["vector"] for h in dense] == [1, 2, 3]
    sparse = hybrid_search(conn, family, "apple", QUERY, k=3, settings=FusionSettings(alpha=0.0, per_leg=7))
    assert [h.ranks["fts"] for h in sparse] == [1, 2, 3]


def test_a_zero_query_vector_leaves_the_full_text_order(conn: Any, family: Any) -> None:
    hits = hybrid_search(conn, family, "apple", np.zeros(16, dtype=np.float32), k=10)
    fts_order = sorted((h for h in hits if h.ranks["fts"] is not None), key=lambda h: h.ranks["fts"])  # type: ignore[arg-type, return-value]
    assert [h.chunk_id for h in hits] == [h.chunk_id for h in fts_order]


def test_the_family_stored_settings_are_used_and_explicit_settings_win(conn: Any, family: Any) -> None:
    from ragstore.search.api import search

    class Fixed(OfflineBackend):
        def embed(self, texts: Any) -> Any:
            return np.stack([QUERY for _ in texts])

    rrf = FusionSettings(fusion="rrf", per_leg=3)
    store_settings(conn, "docs", rrf)
    stored = families.get_family(conn, "docs")
    assert settings_of(stored.options) == rrf
    # k <= per_leg: search() widens each leg to at least k
    got = search(conn, "docs", "apple", k=3, mode="hybrid", backend=Fixed())
    want = hybrid_search(conn, stored, "apple", QUERY, k=3, settings=rrf)
    assert [(h.chunk_id, h.score) for h in got] == [(h.chunk_id, h.score) for h in want]
    assert max(h.score for h in got) < 0.05  # RRF scale
    over = search(conn, "docs", "apple", k=3, mode="hybrid", backend=Fixed(), fusion="cc", alpha=0.5)
    want_cc = hybrid_search(conn, stored, "apple", QUERY, k=3, settings=FusionSettings(alpha=0.5, per_leg=3))
    assert [h.chunk_id for h in over] == [h.chunk_id for h in want_cc]
    store_settings(conn, "docs", None)
    assert settings_of(families.get_family(conn, "docs").options) == DEFAULT_FUSION


@pytest.mark.parametrize(
    "bad",
    [
        FusionSettings(fusion="max"),
        FusionSettings(normalization="l2"),
        FusionSettings(alpha=1.5),
        FusionSettings(per_leg=0),
        FusionSettings(per_leg=1001),
    ],
)
def test_bad_settings_are_refused_before_any_statement(conn: Any, family: Any, bad: FusionSettings) -> None:
    with pytest.raises(InvalidInput):
        hybrid_search(conn, family, "apple", QUERY, k=3, settings=bad)


def test_min_score_means_cosine_in_hybrid_and_the_full_text_score_in_fts(conn: Any, family: Any) -> None:
    from ragstore.search.api import search

    class Fixed(OfflineBackend):
        def embed(self, texts: Any) -> Any:
            return np.stack([QUERY for _ in texts])

    full = search(conn, "docs", "apple", k=10, mode="hybrid", backend=Fixed())
    unit_query = QUERY / np.linalg.norm(QUERY)

    # Hybrid hits leave their vector out unless MMR reads it: the vectors come from a call that asks for them.
    stored = {h.chunk_id: h.vector for h in hybrid_search(conn, family, "apple", QUERY, k=10, vectors=True)}

    def cosine(hit: Any) -> float:
        return float(np.dot(stored[hit.chunk_id], unit_query) / np.linalg.norm(stored[hit.chunk_id]))

    kept = search(conn, "docs", "apple", k=10, mode="hybrid", backend=Fixed(), min_score=0.5)
    assert kept and [h.chunk_id for h in kept] == [h.chunk_id for h in full if cosine(h) >= 0.5]
    assert len(kept) < len(full)  # the floor dropped the far hits, not every hit (an RRF score is < 0.04)
    text = search(conn, "docs", "apple", k=10, mode="fts")
    floor = text[1].score
    assert search(conn, "docs", "apple", k=10, mode="fts", min_score=floor) == [h for h in text if h.score >= floor]


def test_hybrid_hits_carry_the_statements_cosine_and_min_score_and_mmr_use_it(conn: Any, family: Any) -> None:
    from ragstore.search.api import search

    class Fixed(OfflineBackend):
        def embed(self, texts: Any) -> Any:
            return np.stack([QUERY for _ in texts])

    full = search(conn, "docs", "apple", k=10, mode="hybrid", backend=Fixed())
    q = "[" + ",".join(str(float(x)) for x in QUERY) + "]"
    for hit in full:  # the statement's own float8 cosine, for hits of either leg
        (expected,) = conn.execute(
            "SELECT 1 - (embedding <=> %s::vector) FROM ragstore.emb_docs WHERE chunk_id = %s", (q, hit.chunk_id)
        ).fetchone()
        assert hit.cosine == pytest.approx(expected, abs=1e-12)
    for floor_hit in full:  # a floor equal to a hit's cosine keeps that hit: the same number on both sides
        kept = search(conn, "docs", "apple", k=10, mode="hybrid", backend=Fixed(), min_score=floor_hit.cosine)
        assert [h.chunk_id for h in kept] == [h.chunk_id for h in full if h.cosine >= floor_hit.cosine]
        assert floor_hit.chunk_id in {h.chunk_id for h in kept}
    diverse = search(conn, "docs", "apple", k=3, mode="hybrid", backend=Fixed(), rerank="mmr", mmr_lambda=1.0)
    by_id = {h.chunk_id: h for h in full}
    assert [h.score for h in diverse] == [by_id[h.chunk_id].cosine for h in diverse]  # relevance is that cosine


def test_k_above_the_per_leg_depth_widens_both_legs_in_search_and_in_sql(conn: Any, family: Any) -> None:
    from pgvector import Vector

    from ragstore.search.api import search

    class Fixed(OfflineBackend):
        def embed(self, texts: Any) -> Any:
            return np.stack([QUERY for _ in texts])

    store_settings(conn, "docs", FusionSettings(per_leg=2))
    # 7 chunks, 5 of them hold "apple": with 2 per leg the union could hold at most 4; k = 7 needs all 7.
    api = search(conn, "docs", "apple", k=7, mode="hybrid", backend=Fixed())
    assert len(api) == 7
    assert max(h.ranks["vector"] or 0 for h in api) == 7 and max(h.ranks["fts"] or 0 for h in api) == 5
    sql_rows = conn.execute(
        "SELECT chunk_id, fts_rank, vector_rank FROM ragstore.hybrid_search('docs', 'apple', %s, 7)", (Vector(QUERY),)
    ).fetchall()
    assert [r[0] for r in sql_rows] == [h.chunk_id for h in api]
    assert max(r[2] for r in sql_rows) == 7 and max(r[1] or 0 for r in sql_rows) == 5
    # the library function keeps the depth it is given (the tuner compares fused lists at fixed depths)
    fam = families.get_family(conn, "docs")
    assert len(hybrid_search(conn, fam, "apple", QUERY, k=7)) == 4
    assert len(search(conn, "docs", "apple", k=2, mode="hybrid", backend=Fixed())) == 2
