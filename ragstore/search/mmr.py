"""Maximal Marginal Relevance: re-rank hits for relevance *and* diversity.

A pure function over the hits' own vectors: no I/O, no clock, no randomness. Given hits that carry
their vectors, :func:`mmr` picks ``min(k, len(hits))`` of them greedily:

- relevance is each hit's ``score`` (its cosine similarity to the query, as the search returned it);
- the similarity between two hits is the cosine of their vectors; a zero vector has cosine 0 with
  everything (docs/decisions.md, "Zero vectors score 0");
- the first pick is the most relevant hit, whatever λ is;
- each next pick maximises ``λ·relevance − (1−λ)·max(cosine to each hit picked so far)``;
- every tie (equal relevance for the first pick, equal MMR value afterwards) goes to the hit that comes
  earlier in the input;
- the output is in pick order and holds the input ``Hit`` objects themselves, unchanged.

With λ = 1 the result is the input ordered by relevance (stable on ties); with λ = 0 every pick after the
first is the hit least similar to what has been picked. The work is O(k·n·d): the maximum cosine to
the picks is a running maximum updated with one matrix-vector product per pick, never recomputed
over all pairs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ragstore.errors import InvalidInput, ModelMismatch
from ragstore.search.request import Hit

__all__ = ["mmr"]

_Array = npt.NDArray[np.float64]


def mmr(hits: Sequence[Hit], k: int, lambda_: float = 0.5) -> list[Hit]:
    """Return up to ``k`` of ``hits`` in Maximal Marginal Relevance pick order.

    ``hits`` is usually the top ``fetch_k`` of a vector search fetched with their vectors; their order
    matters only to break ties (earlier wins). The result has ``min(k, len(hits))`` hits, each input
    hit at most once, and an empty input gives ``[]``.

    Raises :class:`~ragstore.errors.InvalidInput` when ``k`` is not a positive integer (a ``bool`` is
    not an integer here), when ``lambda_`` is not a finite number in ``[0, 1]``, when a hit has no
    vector, a vector that is not a non-empty 1-d array, or a non-finite score or vector component; and
    :class:`~ragstore.errors.ModelMismatch` when the hits' vectors differ in dimension.
    """
    _check_k(k)
    lam = _check_lambda(lambda_)
    if not hits:
        return []
    relevance = _relevance(hits)
    unit = _unit_rows(hits)
    n = len(hits)
    picks: list[int] = []
    picked = np.zeros(n, dtype=bool)
    # max_sim[i] = max cosine of hit i to the picks so far; -inf before the first pick is never read,
    # because the first pick is by relevance alone.
    max_sim: _Array = np.full(n, -np.inf, dtype=np.float64)
    first = int(np.argmax(relevance))  # argmax returns the first maximum: ties go to the earlier hit
    for step in range(min(k, n)):
        if step == 0:
            choice = first
        else:
            value = lam * relevance - (1.0 - lam) * max_sim
            value[picked] = -np.inf
            choice = int(np.argmax(value))
        picks.append(choice)
        picked[choice] = True
        np.maximum(max_sim, unit @ unit[choice], out=max_sim)
    return [hits[i] for i in picks]


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise InvalidInput(f"k must be a positive integer, got {k!r}")


def _check_lambda(lambda_: float) -> float:
    if isinstance(lambda_, bool) or not isinstance(lambda_, int | float | np.floating | np.integer):
        raise InvalidInput(f"lambda_ must be a number in [0, 1], got {lambda_!r}")
    value = float(lambda_)
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise InvalidInput(f"lambda_ must be a finite number in [0, 1], got {lambda_!r}")
    return value


def _relevance(hits: Sequence[Hit]) -> _Array:
    relevance = np.array([hit.score for hit in hits], dtype=np.float64)
    bad = ~np.isfinite(relevance)
    if bad.any():
        hit = hits[int(np.argmax(bad))]
        raise InvalidInput(f"hit {hit.chunk_id!r} has a non-finite score {hit.score!r}")
    return relevance


def _unit_rows(hits: Sequence[Hit]) -> _Array:
    """Stack the hits' vectors as float64 rows scaled to unit length; zero rows stay zero."""
    dim: int | None = None
    rows: list[npt.NDArray[np.float32]] = []
    for hit in hits:
        vector = hit.vector
        if vector is None:
            raise InvalidInput(f"hit {hit.chunk_id!r} has no vector: MMR needs the hits' vectors")
        if vector.ndim != 1 or vector.shape[0] == 0:
            raise InvalidInput(f"hit {hit.chunk_id!r} has a vector of shape {vector.shape}, expected (dim,)")
        if dim is None:
            dim = int(vector.shape[0])
        elif vector.shape[0] != dim:
            raise ModelMismatch(
                f"hit {hit.chunk_id!r} has a vector of dimension {vector.shape[0]}, the first hit's is {dim}"
            )
        rows.append(vector)
    matrix = np.asarray(np.stack(rows), dtype=np.float64)
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        hit = hits[int(np.argmin(finite))]
        raise InvalidInput(f"hit {hit.chunk_id!r} has a non-finite vector component")
    norms = np.linalg.norm(matrix, axis=1)
    safe = np.where(norms > 0.0, norms, 1.0)
    unit: _Array = matrix / safe[:, None]
    return unit
