"""Blended ranking: semantic, lexical and temporal signals in one score.

A pure function: no I/O, no randomness, and no clock — "now" is an argument. For each candidate
(an id, its cosine to the query, its lexical score such as ``ts_rank_cd``, and its timestamp):

1. **semantic** = ``max(cosine, cosine_floor)``. The floor (0.25 by default) is applied by clamping
   *up* to it, so every candidate at or below the floor ends with a semantic contribution of exactly 0
   after normalisation (it is, or ties with, the minimum), while candidates above the floor keep their
   order and are scaled by how far they sit above the floor rather than by how far below it the worst
   candidate fell.
2. **lexical** = the lexical score as given (a candidate the lexical leg did not find passes 0).
3. **temporal** = ``0.5 ** (age_days / half_life_days)``, exponential decay relative to ``now`` (the
   query's time, passed in): 1 for a chunk stored ``now``, exactly 0.5 one half-life ago, 0.25 two
   half-lives ago. A timestamp in the future is clamped to age 0. This signal is absolute: it is never
   rescaled across the candidates, so records written seconds apart have (nearly) the same recency and
   their relevance decides, while a record one half-life old gets exactly half the recency weight.
4. The lexical signal, and the semantic one by default, are min-max normalised over the candidates: ``(x − min) / (max −
   min)``, and a span ``max − min`` under 1e-12 gives 0 for every candidate (a signal that does not
   discriminate adds nothing, rather than dividing noise by noise). A cosine and a ``ts_rank_cd`` have no
   common scale, which the normalisation gives them; an age has one (the half-life), which it keeps.
   With ``absolute_semantic=True`` the semantic signal is not rescaled either: it is
   ``(max(cosine, floor) − floor) / (1 − floor)``, the cosine's own distance above the floor (memory recall
   uses it with floor 0, so a weak best match stays weak instead of becoming 1).
5. ``score = w_semantic·semantic + w_lexical·lexical + w_temporal·temporal``, so every score lies in
   ``[0, sum(weights)]``. Default weights 0.55 / 0.30 / 0.15; all-zero weights fall back to them.

The result is ordered by score descending, then chunk_id ascending.

**Below-floor candidates are kept, with semantic 0, not dropped.** Blending re-ranks candidates that a
retrieval leg already chose; a chunk can be a poor cosine match and still be the right answer on the
lexical signal (an error code, a flag name, an identifier). Dropping it would let the floor veto the
other legs and make the length of the result depend on the floor. A caller that wants a hard cut
filters on ``cosine`` before or after blending.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from ragstore.common.moments import check_aware
from ragstore.errors import InvalidInput

__all__ = [
    "DEFAULT_COSINE_FLOOR",
    "DEFAULT_HALF_LIFE_DAYS",
    "DEFAULT_WEIGHTS",
    "MIN_SPAN",
    "BlendWeights",
    "Blended",
    "Candidate",
    "blend",
    "min_max",
]

_Array = npt.NDArray[np.float64]

#: a normalised signal whose max − min is below this is flat: 0 for every candidate
MIN_SPAN = 1e-12
DEFAULT_HALF_LIFE_DAYS = 30.0
DEFAULT_COSINE_FLOOR = 0.25
_SECONDS_PER_DAY = 86_400.0


class BlendWeights(NamedTuple):
    """Weights of the three signals; a plain ``(semantic, lexical, temporal)`` tuple works too."""

    semantic: float = 0.55
    lexical: float = 0.30
    temporal: float = 0.15


DEFAULT_WEIGHTS = BlendWeights()


@dataclass(frozen=True, slots=True)
class Candidate:
    """A chunk to blend: its id, cosine to the query, lexical score, and when it was first stored.

    ``timestamp`` must be timezone-aware (the chunk table stores ``timestamptz``).
    """

    chunk_id: str
    cosine: float
    lexical: float
    timestamp: datetime


@dataclass(frozen=True, slots=True)
class Blended:
    """A blended result: the final ``score`` and each signal in ``[0, 1]`` before weighting (semantic and
    lexical normalised over the candidates, temporal the absolute decay)."""

    chunk_id: str
    score: float
    semantic: float
    lexical: float
    temporal: float


def blend(
    candidates: Sequence[Candidate],
    weights: tuple[float, float, float] = DEFAULT_WEIGHTS,
    *,
    now: datetime,
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
    cosine_floor: float = DEFAULT_COSINE_FLOOR,
    absolute_semantic: bool = False,
) -> list[Blended]:
    """Score and order ``candidates`` by the blend described in the module docstring.

    Returns one :class:`Blended` per candidate (none are dropped), ordered by score descending then
    chunk_id ascending; an empty input gives ``[]``.

    Raises :class:`~ragstore.errors.InvalidInput` when ``weights`` is not three finite non-negative
    numbers, ``half_life_days`` is not finite and positive, ``cosine_floor`` is not finite (or, with
    ``absolute_semantic``, not below 1), ``now`` or a
    candidate's timestamp is naive (no timezone), a candidate's cosine or lexical score is NaN or
    infinite, or two candidates share a chunk_id.
    """
    resolved = _check_weights(weights)
    _check_finite("half_life_days", half_life_days)
    if half_life_days <= 0:
        raise InvalidInput(f"half_life_days must be positive, got {half_life_days!r}")
    _check_finite("cosine_floor", cosine_floor)
    if absolute_semantic and cosine_floor >= 1:
        raise InvalidInput(f"cosine_floor must be below 1 for an absolute semantic signal, got {cosine_floor!r}")
    check_aware("now", now)
    _check_candidates(candidates)
    if not candidates:
        return []

    cosine = np.array([c.cosine for c in candidates], dtype=np.float64)
    lexical = np.array([c.lexical for c in candidates], dtype=np.float64)
    age_days = np.array(
        [max((now - c.timestamp).total_seconds(), 0.0) / _SECONDS_PER_DAY for c in candidates],
        dtype=np.float64,
    )
    floored = np.maximum(cosine, float(cosine_floor))
    if absolute_semantic:
        semantic_n = np.minimum((floored - float(cosine_floor)) / (1.0 - float(cosine_floor)), 1.0)
    else:
        semantic_n = min_max(floored)
    lexical_n = min_max(lexical)
    temporal_n = np.power(0.5, age_days / float(half_life_days))
    score = resolved.semantic * semantic_n + resolved.lexical * lexical_n + resolved.temporal * temporal_n

    blended = [
        Blended(
            chunk_id=c.chunk_id,
            score=float(score[i]),
            semantic=float(semantic_n[i]),
            lexical=float(lexical_n[i]),
            temporal=float(temporal_n[i]),
        )
        for i, c in enumerate(candidates)
    ]
    blended.sort(key=lambda b: (-b.score, b.chunk_id))
    return blended


def min_max(values: npt.ArrayLike) -> _Array:
    """Min-max normalise ``values`` to ``[0, 1]``; a span under :data:`MIN_SPAN` gives all zeros.

    Raises :class:`~ragstore.errors.InvalidInput` for a NaN or infinite value. An empty input gives an
    empty array.
    """
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        return array.copy()
    if not np.isfinite(array).all():
        raise InvalidInput("cannot normalise a signal holding NaN or infinite values")
    low = float(array.min())
    span = float(array.max()) - low
    if span < MIN_SPAN:
        return np.zeros_like(array)
    normalised: _Array = (array - low) / span
    return normalised


def _check_weights(weights: Sequence[float]) -> BlendWeights:
    if len(weights) != 3:
        raise InvalidInput(f"weights must be (semantic, lexical, temporal), got {tuple(weights)!r}")
    for name, weight in zip(BlendWeights._fields, weights, strict=True):
        _check_finite(f"weight {name}", weight)
        if weight < 0:
            raise InvalidInput(f"weight {name} must be non-negative, got {weight!r}")
    if all(weight == 0 for weight in weights):
        return DEFAULT_WEIGHTS
    return BlendWeights(*(float(weight) for weight in weights))


def _check_finite(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise InvalidInput(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise InvalidInput(f"{name} must be finite, got {value!r}")


def _check_candidates(candidates: Sequence[Candidate]) -> None:
    seen: set[str] = set()
    for candidate in candidates:
        label = f"candidate {candidate.chunk_id!r}"
        if candidate.chunk_id in seen:
            raise InvalidInput(f"{label} appears twice")
        seen.add(candidate.chunk_id)
        _check_finite(f"{label} cosine", candidate.cosine)
        _check_finite(f"{label} lexical", candidate.lexical)
        check_aware(f"{label} timestamp", candidate.timestamp)
