"""The pure helpers of the read path: cosine, streamed top-k and its merge, the binary decode, LIKE escaping."""

import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragstore.common.like import like_prefix
from ragstore.errors import InvalidInput
from ragstore.families import Family
from ragstore.search import exact
from ragstore.search.request import check_k, check_min_score, ef_search_for


def fam(dim: int, vector_type: str = "vector") -> Family:
    return Family("docs", "offline", "m", dim, vector_type, "emb_docs", "ready", {})


def brute(ids: list[str], matrix: np.ndarray, q: np.ndarray, k: int) -> list[tuple[float, str]]:
    scores = exact.cosine_scores(matrix, q)
    return sorted(((float(s), i) for s, i in zip(scores, ids, strict=True)), key=lambda t: (-t[0], t[1]))[:k]


def batches(ids: list[str], matrix: np.ndarray, size: int) -> list[tuple[list[str], np.ndarray]]:
    return [(ids[i : i + size], matrix[i : i + size]) for i in range(0, len(ids), size)]


def test_cosine_of_a_zero_row_or_zero_query_is_zero_not_nan():
    matrix = np.array([[0, 0, 0], [1, 0, 0], [3, 4, 0]], dtype=np.float32)
    assert exact.cosine_scores(matrix, np.array([1, 0, 0], dtype=np.float32)).tolist() == [0.0, 1.0, 0.6]
    assert exact.cosine_scores(matrix, np.zeros(3, dtype=np.float32)).tolist() == [0.0, 0.0, 0.0]
    assert exact.approx_scores(matrix, np.zeros(3, dtype=np.float32)).tolist() == [0.0, 0.0, 0.0]
    assert exact.approx_scores(matrix, np.array([1, 0, 0], dtype=np.float32))[0] == 0.0


def test_merge_keeps_the_k_best_by_score_then_chunk_id():
    best = [(0.9, "b"), (0.5, "d")]
    merged = exact.merge_top_k(best, ["c", "a", "e"], np.array([0.9, 0.5, 0.1]), 3)
    assert merged == [(0.9, "b"), (0.9, "c"), (0.5, "a")]
    assert exact.merge_top_k([], ["x"], np.array([0.2]), 5) == [(0.2, "x")]


def test_top_k_orders_ties_by_chunk_id_across_batches():
    matrix = np.ones((6, 4), dtype=np.float32)
    ids = ["f", "b", "e", "a", "d", "c"]
    for size in (1, 2, 6):
        ranked = exact.top_k(batches(ids, matrix, size), matrix[0], 4)
        assert [cid for _, cid in ranked] == ["a", "b", "c", "d"]


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 120),
    dim=st.integers(1, 24),
    k=st.integers(1, 15),
    size=st.integers(1, 40),
    seed=st.integers(0, 2**32 - 1),
    dupes=st.booleans(),
)
def test_streamed_top_k_equals_the_brute_force_sort_byte_for_byte(n, dim, k, size, seed, dupes):
    rng = np.random.default_rng(seed)
    matrix = rng.normal(size=(n, dim)).astype(np.float32)
    if dupes:
        matrix[n // 2 :] = matrix[0]  # many equal scores
    matrix[rng.integers(0, n)] = 0.0  # a zero row
    ids = [f"c{i:04d}" for i in rng.permutation(n)]
    q = rng.normal(size=dim).astype(np.float32)
    streamed = exact.top_k(batches(ids, matrix, size), q, k)
    whole = exact.top_k([(ids, matrix)], q, k)
    expected = brute(ids, matrix, q, k)
    assert (
        [(s.hex(), c) for s, c in streamed] == [(s.hex(), c) for s, c in whole] == [(s.hex(), c) for s, c in expected]
    )


def test_top_k_many_finds_the_same_ids_as_top_k_per_query():
    rng = np.random.default_rng(1)
    matrix = rng.normal(size=(300, 8)).astype(np.float32)
    ids = [f"c{i:03d}" for i in range(300)]
    queries = rng.normal(size=(5, 8)).astype(np.float32)
    many = exact.top_k_many(batches(ids, matrix, 64), queries, 7)
    for q, ranked in zip(queries, many, strict=True):
        assert [c for _, c in ranked] == [c for _, c in exact.top_k(batches(ids, matrix, 50), q, 7)]


def test_decode_reads_vector_send_and_halfvec_send():
    rows = [[1.5, -2.0, 0.25], [0.0, 3.0, -1.0]]
    blobs = [struct.pack(">hh3f", 3, 0, *r) for r in rows]
    assert exact.decode(b"".join(blobs), 2, fam(3)).tolist() == rows
    halves = [struct.pack(">hh3e", 3, 0, *r) for r in rows]
    decoded = exact.decode(b"".join(halves), 2, fam(3, "halfvec"))
    assert decoded.dtype == np.float32 and decoded.tolist() == rows


def test_default_batch_is_bounded_in_rows_and_bytes():
    assert exact.default_batch(fam(16)) == 50_000
    assert exact.default_batch(fam(384)) * 384 * 4 <= exact.BATCH_BYTES
    assert exact.default_batch(fam(4000)) == 1024
    assert exact.pages_per_batch(fam(16), 3) == 1 and exact.pages_per_batch(fam(16), 50_000) > 1000


@pytest.mark.parametrize(
    ("prefix", "pattern"),
    [("docs/a_b", "docs/a\\_b%"), ("50%", "50\\%%"), ("a\\b", "a\\\\b%"), ("plain/", "plain/%")],
)
def test_like_prefix_escapes_wildcards_and_the_escape_character(prefix, pattern):
    assert like_prefix(prefix) == pattern


def test_edge_checks_refuse_bools_non_positive_and_non_finite():
    assert check_k(3) == 3 and check_k(np.int64(2)) == 2
    for bad in (0, -1, True, 1.0, "2"):
        with pytest.raises(InvalidInput):
            check_k(bad)
    assert check_min_score(None) is None and check_min_score(0) == 0.0
    for bad in (math.nan, math.inf, False, "0.1"):
        with pytest.raises(InvalidInput):
            check_min_score(bad)


def test_ef_search_is_the_default_or_the_named_one_at_least_k_at_most_1000():
    assert ef_search_for(10, None) == 100
    assert ef_search_for(10, 40) == 40
    assert ef_search_for(2000, None) == 1000 and ef_search_for(300, 20) == 300
