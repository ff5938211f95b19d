"""MMR: hand-computed picks, the contracts, and hypothesis properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragstore.errors import InvalidInput, ModelMismatch
from ragstore.search.mmr import mmr
from ragstore.search.request import Hit


def _hit(chunk_id: str, score: float, vector: list[float] | None) -> Hit:
    array = None if vector is None else np.array(vector, dtype=np.float32)
    return Hit(chunk_id=chunk_id, package_path="p", score=score, text=chunk_id, vector=array)


def _ids(hits: list[Hit]) -> list[str]:
    return [hit.chunk_id for hit in hits]


# a and b are duplicates in direction; c and d are orthogonal to a and to each other.
A = _hit("a", 0.9, [1, 0, 0])
B = _hit("b", 0.8, [2, 0, 0])
C = _hit("c", 0.5, [0, 1, 0])
D = _hit("d", 0.3, [0, 0, 1])


def test_mmr_prefers_diverse_hit_over_near_duplicate() -> None:
    # λ=0.5. Pick 1: a (0.9 is the top relevance).
    # Pick 2: b = 0.5*0.8 - 0.5*cos(b,a)=0.4-0.5=-0.10; c = 0.25-0=0.25; d = 0.15-0=0.15 -> c.
    # Pick 3: b = 0.4 - 0.5*max(cos(b,a)=1, cos(b,c)=0) = -0.10; d = 0.15 - 0.5*max(0,0) = 0.15 -> d.
    # (Using only the last pick c, b would score 0.40 and win: this pins the running maximum.)
    # Pick 4: b.
    assert _ids(mmr([A, B, C, D], k=4, lambda_=0.5)) == ["a", "c", "d", "b"]


def test_mmr_lambda_one_is_relevance_order() -> None:
    assert _ids(mmr([C, A, D, B], k=4, lambda_=1.0)) == ["a", "b", "c", "d"]


def test_mmr_returns_the_input_objects_in_pick_order_truncated_to_k() -> None:
    result = mmr([A, B, C, D], k=2, lambda_=0.5)
    assert result == [A, C]
    assert result[0] is A and result[1] is C


def test_mmr_first_pick_is_most_relevant_even_at_lambda_zero() -> None:
    assert mmr([D, C, A, B], k=1, lambda_=0.0) == [A]


def test_mmr_ties_go_to_earlier_hit() -> None:
    # x and y: equal relevance and both orthogonal to the first pick -> the earlier one (y) wins.
    top = _hit("top", 1.0, [1, 0, 0])
    y = _hit("y", 0.5, [0, 1, 0])
    x = _hit("x", 0.5, [0, 0, 1])
    assert _ids(mmr([top, y, x], k=3)) == ["top", "y", "x"]
    assert _ids(mmr([top, x, y], k=3)) == ["top", "x", "y"]
    # equal top relevance: the first pick is the earlier of the two
    assert _ids(mmr([y, x], k=1)) == ["y"]


def test_mmr_zero_vector_has_cosine_zero_with_everything() -> None:
    # λ=0.5 after a: z (zero vector) = 0.5*0.4 - 0.5*0 = 0.20; b = 0.5*0.8 - 0.5*1 = -0.10 -> z first.
    z = _hit("z", 0.4, [0, 0, 0])
    assert _ids(mmr([A, B, z], k=3)) == ["a", "z", "b"]
    # a zero vector as the first pick makes no candidate similar to it: relevance order follows.
    zero_top = _hit("zt", 2.0, [0, 0, 0])
    assert _ids(mmr([zero_top, B, A], k=2, lambda_=0.5)) == ["zt", "a"]


def test_mmr_empty_input_gives_empty_output() -> None:
    assert mmr([], k=5) == []


def test_mmr_k_larger_than_input_returns_all() -> None:
    assert sorted(_ids(mmr([A, B, C], k=10))) == ["a", "b", "c"]


@pytest.mark.parametrize("k", [0, -1, True, False, 1.0, "3", None])
def test_mmr_rejects_k_that_is_not_a_positive_int(k: object) -> None:
    with pytest.raises(InvalidInput, match="k must be"):
        mmr([A], k=k, lambda_=0.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("lam", [-0.01, 1.01, math.nan, math.inf, -math.inf, True, "0.5", None])
def test_mmr_rejects_lambda_outside_unit_interval(lam: object) -> None:
    with pytest.raises(InvalidInput, match="lambda_"):
        mmr([A], k=1, lambda_=lam)  # type: ignore[arg-type]


def test_mmr_rejects_invalid_arguments_even_for_empty_input() -> None:
    with pytest.raises(InvalidInput):
        mmr([], k=0)
    with pytest.raises(InvalidInput):
        mmr([], k=1, lambda_=2.0)


def test_mmr_rejects_hit_without_vector() -> None:
    with pytest.raises(InvalidInput, match="'nv' has no vector"):
        mmr([A, _hit("nv", 0.1, None)], k=1)


def test_mmr_rejects_mixed_dimensions() -> None:
    with pytest.raises(ModelMismatch, match="dimension 2"):
        mmr([A, _hit("short", 0.1, [1, 0])], k=2)


def test_mmr_rejects_non_finite_score_and_vector() -> None:
    with pytest.raises(InvalidInput, match="non-finite score"):
        mmr([A, _hit("n", math.nan, [1, 0, 0])], k=2)
    with pytest.raises(InvalidInput, match="'v' has a non-finite vector"):
        mmr([A, _hit("v", 0.1, [math.inf, 0, 0])], k=2)


# --- properties -------------------------------------------------------------------------------------

_coord = st.integers(min_value=-3, max_value=3).map(float)


@st.composite
def _hits(draw: st.DrawFn) -> list[Hit]:
    dim = draw(st.integers(min_value=1, max_value=4))
    n = draw(st.integers(min_value=1, max_value=12))
    # few distinct scores so that ties are common
    scores = draw(st.lists(st.sampled_from([-0.5, 0.0, 0.25, 0.5, 0.75, 1.0]), min_size=n, max_size=n))
    vectors = draw(st.lists(st.lists(_coord, min_size=dim, max_size=dim), min_size=n, max_size=n))
    return [_hit(f"h{i:02d}", s, v) for i, (s, v) in enumerate(zip(scores, vectors, strict=True))]


_lambdas = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(hits=_hits(), k=st.integers(min_value=1, max_value=15), lam=_lambdas)
def test_property_first_pick_is_relevance_top1_for_every_lambda(hits: list[Hit], k: int, lam: float) -> None:
    best = max(hit.score for hit in hits)
    first_best = next(hit for hit in hits if hit.score == best)
    assert mmr(hits, k=k, lambda_=lam)[0] is first_best


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(hits=_hits(), k=st.integers(min_value=1, max_value=15))
def test_property_lambda_one_reproduces_stable_relevance_order(hits: list[Hit], k: int) -> None:
    expected = sorted(hits, key=lambda hit: -hit.score)[:k]  # sorted() is stable: ties keep input order
    assert [id(h) for h in mmr(hits, k=k, lambda_=1.0)] == [id(h) for h in expected]


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(hits=_hits(), k=st.integers(min_value=1, max_value=15), lam=_lambdas)
def test_property_output_is_subset_permutation_of_length_min_k_n(hits: list[Hit], k: int, lam: float) -> None:
    result = mmr(hits, k=k, lambda_=lam)
    assert len(result) == min(k, len(hits))
    assert len({id(h) for h in result}) == len(result)
    assert {id(h) for h in result} <= {id(h) for h in hits}


@settings(max_examples=100, deadline=None)
@given(hits=_hits(), k=st.integers(min_value=1, max_value=15), lam=_lambdas)
def test_property_prefix_stability_smaller_k_is_a_prefix(hits: list[Hit], k: int, lam: float) -> None:
    # greedy selection: asking for fewer picks returns the first picks of a longer run
    full = mmr(hits, k=k, lambda_=lam)
    assert mmr(hits, k=max(1, k - 1), lambda_=lam) == full[: max(1, k - 1)]


@given(
    lam=st.one_of(
        st.floats(max_value=-1e-9, allow_nan=False, allow_infinity=True),
        st.floats(min_value=1.0 + 1e-9, allow_nan=False, allow_infinity=True),
        st.just(math.nan),
    )
)
def test_property_lambda_outside_unit_interval_raises(lam: float) -> None:
    with pytest.raises(InvalidInput):
        mmr([A, B], k=1, lambda_=lam)


@given(k=st.integers(max_value=0))
def test_property_non_positive_k_raises(k: int) -> None:
    with pytest.raises(InvalidInput):
        mmr([A, B], k=k)
