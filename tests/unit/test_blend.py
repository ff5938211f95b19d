"""Blended ranking: normalisation edge cases, floor, decay, weights, and properties."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ragstore.errors import InvalidInput
from ragstore.search.blend import DEFAULT_WEIGHTS, Blended, Candidate, blend, min_max

NOW = datetime(2025, 1, 31, tzinfo=UTC)


def _cand(chunk_id: str, cosine: float, lexical: float = 0.0, age_days: float = 0.0) -> Candidate:
    return Candidate(chunk_id, cosine, lexical, NOW - timedelta(days=age_days))


def _by_id(result: list[Blended]) -> dict[str, Blended]:
    return {b.chunk_id: b for b in result}


# --- min-max normalisation edge cases ---------------------------------------------------------------


def test_min_max_single_value_is_zero() -> None:
    assert min_max([0.7]).tolist() == [0.0]


def test_min_max_all_equal_is_all_zero() -> None:
    assert min_max([3.0, 3.0, 3.0]).tolist() == [0.0, 0.0, 0.0]


def test_min_max_span_just_under_threshold_is_flat() -> None:
    assert min_max([0.0, 0.9e-12, 0.5e-12]).tolist() == [0.0, 0.0, 0.0]


def test_min_max_span_just_over_threshold_is_scaled() -> None:
    # span 1.1e-12 >= 1e-12: (0 - 0)/1.1e-12 = 0, (1.1e-12 - 0)/1.1e-12 = 1, (0.55e-12)/1.1e-12 = 0.5
    assert min_max([0.0, 1.1e-12, 0.55e-12]).tolist() == pytest.approx([0.0, 1.0, 0.5])


def test_min_max_maps_to_unit_interval() -> None:
    # min 2, span 8: (2-2)/8=0, (10-2)/8=1, (4-2)/8=0.25
    assert min_max([2.0, 10.0, 4.0]).tolist() == [0.0, 1.0, 0.25]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_min_max_refuses_non_finite(bad: float) -> None:
    with pytest.raises(InvalidInput, match="NaN or infinite"):
        min_max([0.0, bad])


# --- blend ------------------------------------------------------------------------------------------


def test_blend_hand_computed_scores() -> None:
    # cosine: a 0.9, b 0.5, c 0.1 -> clamped to floor: 0.9, 0.5, 0.25 -> min 0.25 span 0.65
    #   semantic: a 1, b (0.5-0.25)/0.65 = 0.384615, c 0
    # lexical: a 0, b 0.4, c 0.8 -> a 0, b 0.5, c 1
    # age days: a 30 (one half-life), b 0, c 60 -> temporal (absolute, not rescaled) 0.5, 1, 0.25
    # score a = 0.55*1 + 0.30*0 + 0.15*0.5 = 0.625
    # score b = 0.55*0.384615 + 0.30*0.5 + 0.15*1 = 0.211538 + 0.15 + 0.15 = 0.511538
    # score c = 0 + 0.30*1 + 0.15*0.25 = 0.3375
    result = blend([_cand("a", 0.9, 0.0, 30), _cand("b", 0.5, 0.4, 0), _cand("c", 0.1, 0.8, 60)], now=NOW)
    assert [b.chunk_id for b in result] == ["a", "b", "c"]
    got = _by_id(result)
    assert got["a"].score == pytest.approx(0.625)
    assert got["b"].score == pytest.approx(0.55 * 0.25 / 0.65 + 0.15 + 0.15)
    assert got["c"].score == pytest.approx(0.3375)
    assert [got[i].temporal for i in "abc"] == [0.5, 1.0, 0.25]
    assert got["c"].semantic == 0.0


def test_blend_keeps_below_floor_candidates_with_semantic_zero() -> None:
    # c (cosine 0.1) and d (cosine -0.3) are both below the 0.25 floor: both semantic 0, both kept;
    # d wins on the lexical signal alone.
    result = blend([_cand("a", 0.8), _cand("c", 0.1, 0.0), _cand("d", -0.3, 1.0)], now=NOW)
    got = _by_id(result)
    assert set(got) == {"a", "c", "d"}
    assert got["c"].semantic == 0.0 and got["d"].semantic == 0.0
    assert got["a"].semantic == 1.0
    assert got["d"].score == pytest.approx(0.30 + 0.15)


def test_blend_floor_does_not_act_when_all_candidates_are_above_it() -> None:
    # cosine 0.9 and 0.6: semantic (0.9-0.6)/0.3 = 1 and 0, not scaled against the floor
    got = _by_id(blend([_cand("a", 0.9), _cand("b", 0.6)], now=NOW))
    assert (got["a"].semantic, got["b"].semantic) == (1.0, 0.0)


def test_blend_future_timestamp_counts_as_now() -> None:
    # a is "1 day in the future" and b is now: both age 0, both temporal 1
    got = _by_id(blend([_cand("a", 0.5, age_days=-1), _cand("b", 0.5, age_days=0)], now=NOW))
    assert got["a"].temporal == got["b"].temporal == 1.0
    got = _by_id(blend([_cand("a", 0.5, age_days=-1), _cand("c", 0.5, age_days=30)], now=NOW))
    assert (got["a"].temporal, got["c"].temporal) == (1.0, 0.5)


def test_blend_half_life_sets_decay_rate() -> None:
    # ages 0, 10, 20 with half-life 10: 1, 0.5, 0.25, as they are (never rescaled to 1, 1/3, 0)
    got = _by_id(
        blend(
            [_cand("a", 0.5, 0, 0), _cand("b", 0.5, 0, 10), _cand("c", 0.5, 0, 20)],
            now=NOW,
            half_life_days=10,
        )
    )
    assert [got[i].temporal for i in "abc"] == [1.0, 0.5, 0.25]


def test_blend_a_record_one_half_life_old_gets_exactly_half_the_recency_weight() -> None:
    # equal relevance, 30 days apart (the default half-life): recency 1 and 0.5, so the scores differ by
    # exactly half the temporal weight; with min-max rescaling they differed by all of it (1 and 0).
    got = _by_id(blend([_cand("new", 0.6, 0.2, 0), _cand("old", 0.6, 0.2, 30)], now=NOW))
    assert (got["new"].temporal, got["old"].temporal) == (1.0, 0.5)
    assert got["new"].score - got["old"].score == pytest.approx(DEFAULT_WEIGHTS.temporal / 2, abs=1e-15)
    assert got["old"].score == pytest.approx(DEFAULT_WEIGHTS.temporal * 0.5)


def test_blend_records_seconds_apart_share_their_recency_and_relevance_decides() -> None:
    # Written 0.7 s apart: d (the most relevant on cosine) first, c (a middling cosine and the only lexical
    # match) last. Rescaled across the candidates, those 1.4 s made c's recency 1 and d's 0, and c ranked
    # first; as an absolute decay the three recencies are equal to 1e-6 and the relevance decides.
    t0 = NOW - timedelta(seconds=2)
    cands = [
        Candidate("d", 0.9, 0.0, t0),
        Candidate("e", 0.25, 0.0, t0 + timedelta(seconds=0.7)),
        Candidate("c", 0.445, 1.0, t0 + timedelta(seconds=1.4)),
    ]
    result = blend(cands, now=NOW)
    assert [b.chunk_id for b in result] == ["d", "c", "e"]
    assert all(b.temporal == pytest.approx(1.0, abs=1e-6) for b in result)
    relevance_only = blend(cands, (0.55, 0.30, 0.0), now=NOW)
    assert [b.chunk_id for b in relevance_only] == [b.chunk_id for b in result]


def test_blend_single_candidate_scores_its_recency_only() -> None:
    [only] = blend([_cand("a", 0.9, 3.0)], now=NOW)
    assert (only.score, only.semantic, only.lexical, only.temporal) == (0.15, 0.0, 0.0, 1.0)


def test_blend_all_equal_candidates_tie_and_order_by_id() -> None:
    result = blend([_cand("c", 0.5, 1.0), _cand("a", 0.5, 1.0), _cand("b", 0.5, 1.0)], now=NOW)
    assert [(b.chunk_id, b.score) for b in result] == [("a", 0.15), ("b", 0.15), ("c", 0.15)]


def test_blend_empty_input() -> None:
    assert blend([], now=NOW) == []


def test_blend_custom_weights_change_the_order() -> None:
    cands = [_cand("sem", 0.9, 0.0), _cand("lex", 0.3, 5.0)]
    assert [b.chunk_id for b in blend(cands, now=NOW)] == ["sem", "lex"]
    assert [b.chunk_id for b in blend(cands, (0.1, 0.9, 0.0), now=NOW)] == ["lex", "sem"]


def test_blend_all_zero_weights_fall_back_to_defaults() -> None:
    cands = [_cand("a", 0.9, 0.0, 30), _cand("b", 0.5, 0.4, 0), _cand("c", 0.1, 0.8, 60)]
    assert blend(cands, (0.0, 0.0, 0.0), now=NOW) == blend(cands, DEFAULT_WEIGHTS, now=NOW)
    assert blend(cands, (0.0, 0.0, 0.0), now=NOW)[0].score == pytest.approx(0.625)


@pytest.mark.parametrize("weights", [(-0.1, 0.5, 0.5), (0.5, math.nan, 0.5), (0.5, 0.5, math.inf)])
def test_blend_rejects_negative_or_non_finite_weights(weights: tuple[float, float, float]) -> None:
    with pytest.raises(InvalidInput, match="weight"):
        blend([_cand("a", 0.5)], weights, now=NOW)


def test_blend_rejects_wrong_number_of_weights() -> None:
    with pytest.raises(InvalidInput, match="semantic, lexical, temporal"):
        blend([_cand("a", 0.5)], (0.5, 0.5), now=NOW)  # type: ignore[arg-type]


@pytest.mark.parametrize("field", ["cosine", "lexical"])
@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_blend_refuses_non_finite_signal(field: str, bad: float) -> None:
    kwargs = {"cosine": 0.5, "lexical": 0.0, field: bad}
    cand = Candidate("x", kwargs["cosine"], kwargs["lexical"], NOW)
    with pytest.raises(InvalidInput, match=f"candidate 'x' {field}"):
        blend([_cand("a", 0.5), cand], now=NOW)


def test_blend_rejects_naive_datetimes_and_duplicate_ids() -> None:
    with pytest.raises(InvalidInput, match="now must be timezone-aware"):
        blend([_cand("a", 0.5)], now=datetime(2025, 1, 1))
    with pytest.raises(InvalidInput, match="candidate 'n' timestamp"):
        blend([Candidate("n", 0.5, 0.0, datetime(2025, 1, 1))], now=NOW)
    with pytest.raises(InvalidInput, match="candidate 'a' appears twice"):
        blend([_cand("a", 0.5), _cand("a", 0.6)], now=NOW)


@pytest.mark.parametrize("half_life", [0.0, -1.0, math.inf, math.nan])
def test_blend_rejects_non_positive_or_non_finite_half_life(half_life: float) -> None:
    with pytest.raises(InvalidInput, match="half_life_days"):
        blend([_cand("a", 0.5)], now=NOW, half_life_days=half_life)


@pytest.mark.parametrize("floor", [math.nan, math.inf])
def test_blend_rejects_non_finite_cosine_floor(floor: float) -> None:
    with pytest.raises(InvalidInput, match="cosine_floor"):
        blend([_cand("a", 0.5)], now=NOW, cosine_floor=floor)


# --- properties -------------------------------------------------------------------------------------

_signal = st.floats(min_value=-1.0, max_value=1.0, allow_nan=False)
_lex = st.floats(min_value=0.0, max_value=10.0, allow_nan=False)
_age = st.floats(min_value=-5.0, max_value=400.0, allow_nan=False)
_weight = st.floats(min_value=0.0, max_value=5.0, allow_nan=False)


@st.composite
def _candidates(draw: st.DrawFn) -> list[Candidate]:
    n = draw(st.integers(min_value=1, max_value=10))
    ids = draw(st.lists(st.text("abcxyz", min_size=1, max_size=3), min_size=n, max_size=n, unique=True))
    return [_cand(i, draw(_signal), draw(_lex), draw(_age)) for i in ids]


@settings(max_examples=200, deadline=None)
@given(cands=_candidates(), weights=st.tuples(_weight, _weight, _weight))
def test_property_scores_lie_in_zero_to_sum_of_weights(
    cands: list[Candidate], weights: tuple[float, float, float]
) -> None:
    effective = DEFAULT_WEIGHTS if sum(weights) == 0 else weights
    for b in blend(cands, weights, now=NOW):
        assert -1e-12 <= b.score <= sum(effective) + 1e-12
        assert all(0.0 <= s <= 1.0 for s in (b.semantic, b.lexical, b.temporal))


@settings(max_examples=200, deadline=None)
@given(cands=_candidates(), scale=st.floats(min_value=0.01, max_value=100.0), shift=st.floats(-50.0, 50.0))
def test_property_invariant_under_positive_affine_transform_of_lexical(
    cands: list[Candidate], scale: float, shift: float
) -> None:
    span = max(c.lexical for c in cands) - min(c.lexical for c in cands)
    assume(span == 0.0 or span > 1e-6)  # keep clear of the flat-signal threshold
    moved = [Candidate(c.chunk_id, c.cosine, scale * c.lexical + shift, c.timestamp) for c in cands]
    before = {b.chunk_id: b for b in blend(cands, now=NOW)}
    after = {b.chunk_id: b for b in blend(moved, now=NOW)}
    for chunk_id, b in before.items():
        assert after[chunk_id].lexical == pytest.approx(b.lexical, abs=1e-9)
        assert after[chunk_id].score == pytest.approx(b.score, abs=1e-9)


@settings(max_examples=100, deadline=None)
@given(cands=_candidates(), shift_days=st.integers(min_value=-3650, max_value=3650))
def test_property_invariant_under_shifting_all_times_together(cands: list[Candidate], shift_days: int) -> None:
    delta = timedelta(days=shift_days)
    moved = [Candidate(c.chunk_id, c.cosine, c.lexical, c.timestamp + delta) for c in cands]
    before = blend(cands, now=NOW)
    after = blend(moved, now=NOW + delta)
    assert [b.chunk_id for b in after] == [b.chunk_id for b in before]
    assert [b.score for b in after] == pytest.approx([b.score for b in before], abs=1e-12)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(cands=_candidates(), weights=st.tuples(_weight, _weight, _weight), seed=st.randoms())
def test_property_order_is_deterministic_and_independent_of_input_order(
    cands: list[Candidate], weights: tuple[float, float, float], seed: object
) -> None:
    shuffled = list(cands)
    seed.shuffle(shuffled)  # type: ignore[attr-defined]
    first = blend(cands, weights, now=NOW)
    assert blend(shuffled, weights, now=NOW) == first
    keys = [(-b.score, b.chunk_id) for b in first]
    assert keys == sorted(keys)
    assert np.isfinite([b.score for b in first]).all()


def test_blend_absolute_semantic_keeps_each_cosine_above_the_floor_unscaled() -> None:
    # The measured MiniLM cosines of "who signs off on shipping to production?" to three records: all under
    # the 0.25 floor, so min-max over the floored values is flat; absolute above floor 0 they stay apart.
    cands = [_cand("deploys", 0.1799), _cand("cafeteria", 0.1260), _cand("wifi", -0.0075)]
    flat = _by_id(blend(cands, now=NOW))
    assert {b.semantic for b in flat.values()} == {0.0}
    got = blend(cands, now=NOW, cosine_floor=0.0, absolute_semantic=True)
    assert [b.chunk_id for b in got] == ["deploys", "cafeteria", "wifi"]
    assert [b.semantic for b in got] == pytest.approx([0.1799, 0.1260, 0.0])
    half = _by_id(blend([_cand("a", 0.75), _cand("b", 0.5)], now=NOW, cosine_floor=0.5, absolute_semantic=True))
    assert (half["a"].semantic, half["b"].semantic) == (0.5, 0.0)
    with pytest.raises(InvalidInput, match="below 1"):
        blend(cands, now=NOW, cosine_floor=1.0, absolute_semantic=True)
