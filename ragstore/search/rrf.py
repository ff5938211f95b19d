"""Reciprocal Rank Fusion in Python: the reference the hybrid SQL statement is checked against.

The hybrid search (docs/decisions.md, "Hybrid search") fuses its legs in ONE SQL statement; this module
computes the same thing over ranked id lists, purely (no I/O, no clock), so a test can compare the two
on the same input.

For legs ``L`` (e.g. ``{"fts": [...], "vector": [...]}``), each a ranked list of ids (best first), the
fused score of an id is::

    score(id) = Σ over legs where id appears  w_leg / (k + rank_leg(id))

with 1-based ranks, ``k = 60`` by default (Cormack et al., 2009) and ``w_leg = 1`` unless weights say
otherwise. A leg that does not contain the id contributes nothing and reports its rank as ``None``.
The order is deterministic: fused score descending, then id ascending. Scores are summed with
:func:`math.fsum` (exactly rounded), so the order of the legs never changes a score or a tie.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ragstore.errors import InvalidInput

__all__ = ["DEFAULT_RRF_K", "Fused", "rrf"]

DEFAULT_RRF_K = 60


@dataclass(frozen=True, slots=True)
class Fused:
    """One fused result: the id, its fused score, and its 1-based rank in each leg (``None`` if absent)."""

    chunk_id: str
    score: float
    ranks: dict[str, int | None]


def rrf(
    legs: Mapping[str, Sequence[str]],
    k: int = DEFAULT_RRF_K,
    weights: Mapping[str, float] | None = None,
    limit: int | None = None,
) -> list[Fused]:
    """Fuse ranked id lists with Reciprocal Rank Fusion.

    Returns one :class:`Fused` per distinct id found in any leg, ordered by fused score descending then
    id ascending, cut to ``limit`` when given. Every result's ``ranks`` has one entry per leg. A leg
    whose weight is 0 still reports ranks but adds nothing to the score; legs missing from ``weights``
    weigh 1. An empty leg is allowed; no legs at all give ``[]``.

    Raises :class:`~ragstore.errors.InvalidInput` when ``k`` is not a positive integer (``bool`` is not
    one), when a weight is negative or not finite, when ``weights`` names a leg that ``legs`` does not
    have, when ``limit`` is not a positive integer or ``None``, or when an id appears twice in one leg
    (a ranking holds each id once; a duplicate is a bug upstream, not something to guess about).
    """
    _check_positive_int("k", k)
    if limit is not None:
        _check_positive_int("limit", limit)
    leg_weights = _check_weights(legs, weights)

    ranks: dict[str, dict[str, int | None]] = {}
    for leg, ids in legs.items():
        seen: set[str] = set()
        for position, chunk_id in enumerate(ids, start=1):
            if chunk_id in seen:
                raise InvalidInput(f"leg {leg!r} lists id {chunk_id!r} twice (again at rank {position})")
            seen.add(chunk_id)
            ranks.setdefault(chunk_id, dict.fromkeys(legs, None))[leg] = position

    fused = [
        Fused(
            chunk_id=chunk_id,
            score=math.fsum(leg_weights[leg] / (k + rank) for leg, rank in leg_ranks.items() if rank is not None),
            ranks=leg_ranks,
        )
        for chunk_id, leg_ranks in ranks.items()
    ]
    fused.sort(key=lambda item: (-item.score, item.chunk_id))
    return fused if limit is None else fused[:limit]


def _check_positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(f"{name} must be a positive integer, got {value!r}")


def _check_weights(legs: Mapping[str, Sequence[str]], weights: Mapping[str, float] | None) -> dict[str, float]:
    resolved = dict.fromkeys(legs, 1.0)
    if weights is None:
        return resolved
    for leg, weight in weights.items():
        if leg not in legs:
            raise InvalidInput(f"weights names leg {leg!r}, which is not one of the legs {sorted(legs)}")
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            raise InvalidInput(f"weight of leg {leg!r} must be a number, got {weight!r}")
        if not math.isfinite(weight) or weight < 0:
            raise InvalidInput(f"weight of leg {leg!r} must be finite and non-negative, got {weight!r}")
        resolved[leg] = float(weight)
    return resolved
