"""Cosine similarity and ranking of texts with any backend, no index needed (``ragstore embed``).

Scores are :func:`ragstore.search.exact.cosine_scores`, the cosine the exact search path ranks with: a
zero vector scores 0 against anything (cosine is undefined there; 0 is the neutral "orthogonal").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragstore.embed.base import Backend
from ragstore.search.exact import cosine_scores

__all__ = ["RankedText", "rank_texts", "similarity"]


@dataclass(frozen=True)
class RankedText:
    """One candidate of :func:`rank_texts`: its 1-based ``rank``, 0-based input ``index``, cosine ``score``."""

    rank: int
    index: int
    score: float
    text: str


def _cosines(backend: Backend, query: str, candidates: Sequence[str]) -> list[float]:
    matrix = backend.embed([query, *candidates])
    return [float(x) for x in cosine_scores(matrix[1:], matrix[0])]


def similarity(backend: Backend, a: str, b: str) -> float:
    """The cosine similarity of texts ``a`` and ``b`` as ``backend`` embeds them (one embedding call)."""
    return _cosines(backend, a, [b])[0]


def rank_texts(backend: Backend, query: str, candidates: Sequence[str]) -> list[RankedText]:
    """``candidates`` by cosine similarity to ``query``, highest first; ties keep input order."""
    scores = _cosines(backend, query, candidates)
    order = sorted(range(len(candidates)), key=lambda i: (-scores[i], i))
    return [RankedText(rank + 1, i, scores[i], candidates[i]) for rank, i in enumerate(order)]
