"""Reciprocal Rank Fusion reference: a hand-computed example, weights, ordering and contracts."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragstore.errors import InvalidInput
from ragstore.search.rrf import Fused, rrf


def test_rrf_hand_computed_example_with_one_leg_only_hits() -> None:
    # fts:    a(1) b(2) c(3)          vector: b(1) d(2) a(3)
    # a = 1/(60+1) + 1/(60+3) = 0.0163934 + 0.0158730 = 0.0322664
    # b = 1/(60+2) + 1/(60+1) = 0.0161290 + 0.0163934 = 0.0325224
    # c = 1/(60+3)            = 0.0158730   (fts only)
    # d = 1/(60+2)            = 0.0161290   (vector only)
    # order: b > a > d > c
    result = rrf({"fts": ["a", "b", "c"], "vector": ["b", "d", "a"]})
    assert [f.chunk_id for f in result] == ["b", "a", "d", "c"]
    by_id = {f.chunk_id: f for f in result}
    assert by_id["a"].score == pytest.approx(1 / 61 + 1 / 63, abs=1e-15)
    assert by_id["b"].score == pytest.approx(1 / 62 + 1 / 61, abs=1e-15)
    assert by_id["c"].score == pytest.approx(1 / 63, abs=1e-15)
    assert by_id["d"].score == pytest.approx(1 / 62, abs=1e-15)
    assert by_id["c"].ranks == {"fts": 3, "vector": None}
    assert by_id["d"].ranks == {"fts": None, "vector": 2}
    assert by_id["a"].ranks == {"fts": 1, "vector": 3}


def test_rrf_equal_scores_break_ties_by_id_ascending() -> None:
    # z is rank 1 in fts only, a is rank 1 in vector only: both 1/61, so a before z.
    result = rrf({"fts": ["z"], "vector": ["a"]})
    assert [f.chunk_id for f in result] == ["a", "z"]
    assert result[0].score == result[1].score == 1 / 61


def test_rrf_custom_k_changes_the_scores() -> None:
    # k=1: x = 1/(1+1) + 1/(1+2) = 0.8333; y = 1/(1+2) + 1/(1+1) = 0.8333 -> tie, x < y by id
    result = rrf({"l1": ["x", "y"], "l2": ["y", "x"]}, k=1)
    assert [(f.chunk_id, f.score) for f in result] == [("x", 1 / 2 + 1 / 3), ("y", 1 / 3 + 1 / 2)]


def test_rrf_weights_scale_each_leg() -> None:
    # weights fts 0.5, vector 2: a = 0.5/61 = 0.0081967 ; b = 2/61 = 0.0327869 -> b first
    result = rrf({"fts": ["a"], "vector": ["b"]}, weights={"fts": 0.5, "vector": 2.0})
    assert [(f.chunk_id, f.score) for f in result] == [("b", 2 / 61), ("a", 0.5 / 61)]


def test_rrf_leg_missing_from_weights_weighs_one_and_zero_weight_keeps_ranks() -> None:
    result = rrf({"fts": ["a"], "vector": ["b"]}, weights={"fts": 0.0})
    assert [(f.chunk_id, f.score) for f in result] == [("b", 1 / 61), ("a", 0.0)]
    assert result[1].ranks == {"fts": 1, "vector": None}


def test_rrf_limit_cuts_after_ordering() -> None:
    result = rrf({"fts": ["a", "b", "c"], "vector": ["b", "d", "a"]}, limit=2)
    assert [f.chunk_id for f in result] == ["b", "a"]


def test_rrf_no_legs_or_empty_legs_give_empty_result() -> None:
    assert rrf({}) == []
    assert rrf({"fts": [], "vector": []}) == []


def test_rrf_single_leg_preserves_its_order() -> None:
    result = rrf({"vector": ["q", "b", "m"]})
    assert [f.chunk_id for f in result] == ["q", "b", "m"]
    assert [f.ranks["vector"] for f in result] == [1, 2, 3]


@pytest.mark.parametrize("k", [0, -5, True, 1.5, None])
def test_rrf_rejects_k_that_is_not_a_positive_int(k: object) -> None:
    with pytest.raises(InvalidInput, match="k must be a positive integer"):
        rrf({"fts": ["a"]}, k=k)  # type: ignore[arg-type]


@pytest.mark.parametrize("weight", [-0.1, math.nan, math.inf, -math.inf])
def test_rrf_rejects_negative_or_non_finite_weight(weight: float) -> None:
    with pytest.raises(InvalidInput, match="weight of leg 'fts'"):
        rrf({"fts": ["a"], "vector": ["b"]}, weights={"fts": weight})


def test_rrf_rejects_weight_for_unknown_leg() -> None:
    with pytest.raises(InvalidInput, match="'bm25'"):
        rrf({"fts": ["a"]}, weights={"bm25": 1.0})


@pytest.mark.parametrize("limit", [0, -1, True])
def test_rrf_rejects_bad_limit(limit: object) -> None:
    with pytest.raises(InvalidInput, match="limit"):
        rrf({"fts": ["a"]}, limit=limit)  # type: ignore[arg-type]


def test_rrf_rejects_duplicate_id_within_a_leg() -> None:
    with pytest.raises(InvalidInput, match="leg 'fts' lists id 'a' twice"):
        rrf({"fts": ["a", "b", "a"]})


_ids = st.lists(st.sampled_from("abcdefghij"), unique=True, max_size=10)


@given(fts=_ids, vector=_ids)
def test_property_rrf_is_sorted_complete_and_independent_of_leg_order(fts: list[str], vector: list[str]) -> None:
    result = rrf({"fts": fts, "vector": vector})
    assert {f.chunk_id for f in result} == set(fts) | set(vector)
    keys = [(-f.score, f.chunk_id) for f in result]
    assert keys == sorted(keys)
    swapped = rrf({"vector": vector, "fts": fts})
    assert [(f.chunk_id, f.score) for f in swapped] == [(f.chunk_id, f.score) for f in result]
    for fused in result:
        assert isinstance(fused, Fused)
        assert fused.ranks["fts"] == (fts.index(fused.chunk_id) + 1 if fused.chunk_id in fts else None)
