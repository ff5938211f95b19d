"""Reciprocal Rank Fusion as :func:`ragstore.search.fusion.fuse` computes it (the one Python RRF, the reference
the SQL statement is held to): a hand-computed example, weights, ordering and contracts."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragstore.errors import InvalidInput
from ragstore.search.fusion import Candidate, FusionSettings, fuse
from ragstore.search.hybrid import check_weights


def rrf(
    legs: Mapping[str, Sequence[str]], k: int = 60, weights: Mapping[str, float] | None = None, per_leg: int = 1000
) -> list[tuple[str, float]]:
    """fuse() over candidates made from ranked id lists of the legs fts and vector."""
    fts, vector = list(legs.get("fts", [])), list(legs.get("vector", []))
    candidates = [Candidate(cid, _rank(fts, cid), _rank(vector, cid), 0, 0) for cid in {*fts, *vector}]
    return fuse(candidates, FusionSettings(fusion="rrf", rrf_k=k, per_leg=per_leg).checked(), weights)


def _rank(leg: list[str], chunk_id: str) -> int | None:
    return leg.index(chunk_id) + 1 if chunk_id in leg else None


def test_rrf_hand_computed_example_with_one_leg_only_hits() -> None:
    # fts:    a(1) b(2) c(3)          vector: b(1) d(2) a(3)
    # a = 1/(60+1) + 1/(60+3) = 0.0163934 + 0.0158730 = 0.0322664
    # b = 1/(60+2) + 1/(60+1) = 0.0161290 + 0.0163934 = 0.0325224
    # c = 1/(60+3)            = 0.0158730   (fts only)
    # d = 1/(60+2)            = 0.0161290   (vector only)
    # order: b > a > d > c
    result = rrf({"fts": ["a", "b", "c"], "vector": ["b", "d", "a"]})
    assert [cid for cid, _ in result] == ["b", "a", "d", "c"]
    by_id = dict(result)
    assert by_id["a"] == pytest.approx(1 / 61 + 1 / 63, abs=1e-15)
    assert by_id["b"] == pytest.approx(1 / 62 + 1 / 61, abs=1e-15)
    assert by_id["c"] == pytest.approx(1 / 63, abs=1e-15)
    assert by_id["d"] == pytest.approx(1 / 62, abs=1e-15)


def test_rrf_equal_scores_break_ties_by_id_ascending() -> None:
    # z is rank 1 in fts only, a is rank 1 in vector only: both 1/61, so a before z.
    result = rrf({"fts": ["z"], "vector": ["a"]})
    assert result == [("a", 1 / 61), ("z", 1 / 61)]


def test_rrf_custom_k_changes_the_scores() -> None:
    # k=1: x = 1/(1+1) + 1/(1+2) = 0.8333; y = 1/(1+2) + 1/(1+1) = 0.8333 -> tie, x < y by id
    result = rrf({"fts": ["x", "y"], "vector": ["y", "x"]}, k=1)
    assert result == [("x", math.fsum([1 / 2, 1 / 3])), ("y", math.fsum([1 / 3, 1 / 2]))]


def test_rrf_weights_scale_each_leg() -> None:
    # weights fts 0.5, vector 2: a = 0.5/61 = 0.0081967 ; b = 2/61 = 0.0327869 -> b first
    result = rrf({"fts": ["a"], "vector": ["b"]}, weights={"fts": 0.5, "vector": 2.0})
    assert result == [("b", 2 / 61), ("a", 0.5 / 61)]


def test_rrf_leg_missing_from_weights_weighs_one_and_zero_weight_keeps_the_hit() -> None:
    result = rrf({"fts": ["a"], "vector": ["b"]}, weights={"fts": 0.0})
    assert result == [("b", 1 / 61), ("a", 0.0)]


def test_rrf_per_leg_cuts_each_leg_before_fusing() -> None:
    # at depth 1 only a (fts) and b (vector) count; c is deeper than per_leg in both legs
    result = rrf({"fts": ["a", "c"], "vector": ["b", "c"]}, per_leg=1)
    assert result == [("a", 1 / 61), ("b", 1 / 61)]


def test_rrf_empty_legs_give_empty_result() -> None:
    assert rrf({}) == []
    assert rrf({"fts": [], "vector": []}) == []


def test_rrf_single_leg_preserves_its_order() -> None:
    result = rrf({"vector": ["q", "b", "m"]})
    assert [cid for cid, _ in result] == ["q", "b", "m"]


@pytest.mark.parametrize("k", [0, -5, True, 1.5, None])
def test_rrf_rejects_k_that_is_not_a_positive_int(k: object) -> None:
    with pytest.raises(InvalidInput, match="rrf_k must be a positive integer"):
        FusionSettings(fusion="rrf", rrf_k=k).checked()  # type: ignore[arg-type]


@pytest.mark.parametrize("weight", [-0.1, math.nan, math.inf, -math.inf])
def test_rrf_rejects_negative_or_non_finite_weight(weight: float) -> None:
    with pytest.raises(InvalidInput, match="weight of leg 'fts'"):
        check_weights({"fts": weight})


def test_rrf_rejects_weight_for_unknown_leg() -> None:
    with pytest.raises(InvalidInput, match="'bm25'"):
        check_weights({"bm25": 1.0})


_ids = st.lists(st.sampled_from("abcdefghij"), unique=True, max_size=10)


@given(fts=_ids, vector=_ids)
def test_property_rrf_is_sorted_complete_and_independent_of_leg_order(fts: list[str], vector: list[str]) -> None:
    result = rrf({"fts": fts, "vector": vector})
    assert {cid for cid, _ in result} == set(fts) | set(vector)
    keys = [(-score, cid) for cid, score in result]
    assert keys == sorted(keys)
    swapped = rrf({"fts": vector, "vector": fts})
    assert sorted(swapped) == sorted(result)
