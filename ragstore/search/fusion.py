"""How hybrid search fuses its two legs: the settings, their defaults, and a numpy reference.

Two kinds of fusion (docs/decisions.md, "Hybrid search"):

- ``rrf``: Reciprocal Rank Fusion, ``Σ w_leg / (rrf_k + rank_leg)`` over the legs that found the chunk
  (Cormack et al., 2009; ``rrf_k`` 60 by default). It reads ranks only: :func:`fuse` is the one Python
  reference, which the tests hold the SQL statement to.
- ``cc``: convex combination of normalised scores, ``alpha · norm(cosine) + (1 − alpha) · norm(full
  text)``. Every candidate (the union of the legs' top ``per_leg``) has both scores: its cosine to the
  query and its full-text score (0 when it holds none of the query's words). ``norm`` uses the statistics
  of each leg's own top-``per_leg`` list:

  - ``minmax``: ``(x − min) / (max − min)``;
  - ``zscore``: ``(x − mean) / stddev`` (population);
  - ``tmm`` (theoretical min-max): ``(x − lo) / (max − lo)``, ``lo`` the floor the score cannot go below
    (−1 for cosine, 0 for the full-text score).

  An empty leg (no word matched, a zero query vector) adds 0. A degenerate spread gives 0 (zscore) or
  1 to the leg's best and 0 below it (minmax).

The SQL statement (block ``hybrid`` of ``ragstore/sql/hybrid.sql``) computes exactly this;
:func:`fuse` does it in numpy over candidate rows, which the tests compare and the tuner
(:mod:`ragstore.evaluation.tune`) uses to try many settings on one fetch of candidates.

A family may store its own settings (``ragstore family tune``) under the option ``"fusion"``; the
settings, their defaults and their check are the family record's (:attr:`ragstore.families.Family.fusion`,
read with the other facts a search reads of a family), re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ragstore.families import (
    DEFAULT_FUSION as DEFAULT_FUSION,
)
from ragstore.families import (
    FUSIONS as FUSIONS,
)
from ragstore.families import (
    MAX_PER_LEG as MAX_PER_LEG,
)
from ragstore.families import (
    NORMALIZATIONS as NORMALIZATIONS,
)
from ragstore.families import (
    FusionSettings as FusionSettings,
)
from ragstore.families import (
    settings_of as settings_of,
)

__all__ = [
    "DEFAULT_FUSION",
    "FUSIONS",
    "NORMALIZATIONS",
    "Candidate",
    "FusionSettings",
    "fuse",
    "settings_of",
]


@dataclass(frozen=True, slots=True)
class Candidate:
    """One hybrid candidate: its ranks in each leg's list (None when absent) and both leg scores."""

    chunk_id: str
    fts_rank: int | None
    vector_rank: int | None
    lexical: float
    cosine: float


def _norm(x: npt.NDArray[np.float64], leg: npt.NDArray[np.float64], kind: str, floor: float) -> npt.NDArray[np.float64]:
    if leg.size == 0:
        return np.zeros_like(x)
    lo, hi = float(leg.min()), float(leg.max())
    if kind == "minmax":
        if hi - lo == 0.0:
            return (x >= hi).astype(np.float64)
        return (x - lo) / (hi - lo)
    if kind == "zscore":
        sd = float(leg.std())
        return np.zeros_like(x) if sd == 0.0 else (x - float(leg.mean())) / sd
    span = hi - floor
    return np.zeros_like(x) if span == 0.0 else (x - floor) / span


def fuse(
    candidates: Sequence[Candidate], settings: FusionSettings, weights: Mapping[str, float] | None = None
) -> list[tuple[str, float]]:
    """``(chunk_id, fused score)`` of the candidates in a leg's top ``settings.per_leg``, best first.

    A candidate ranked deeper than ``per_leg`` in a leg counts as absent from that leg, so candidates
    fetched once at a larger depth can be fused at any smaller one. Ties go to the smaller chunk_id.
    ``weights`` are RRF's per-leg weights (1 when absent).
    """
    n = settings.per_leg
    kept = [
        c
        for c in candidates
        if (c.fts_rank is not None and c.fts_rank <= n) or (c.vector_rank is not None and c.vector_rank <= n)
    ]
    if not kept:
        return []
    if settings.fusion == "rrf":
        w = {"fts": 1.0, "vector": 1.0, **(weights or {})}
        k = settings.rrf_k
        scores = [
            math.fsum(
                weight / (k + rank)
                for weight, rank in ((w["fts"], c.fts_rank), (w["vector"], c.vector_rank))
                if rank is not None and rank <= n
            )
            for c in kept
        ]
    else:
        lexical = np.array([c.lexical for c in kept], dtype=np.float64)
        cosine = np.array([c.cosine for c in kept], dtype=np.float64)
        in_fts = np.array([c.fts_rank is not None and c.fts_rank <= n for c in kept])
        in_vec = np.array([c.vector_rank is not None and c.vector_rank <= n for c in kept])
        f_norm = _norm(lexical, lexical[in_fts], settings.normalization, 0.0)
        v_norm = _norm(cosine, cosine[in_vec], settings.normalization, -1.0)
        fused = settings.alpha * v_norm + (1.0 - settings.alpha) * f_norm
        scores = [float(s) for s in fused]
    order = sorted(zip((c.chunk_id for c in kept), scores, strict=True), key=lambda item: (-item[1], item[0]))
    return order


def store_settings(conn: Any, family: str, settings: FusionSettings | None) -> None:
    """Store ``settings`` as family ``family``'s fusion (None: remove them, back to the default).

    Raises NotFound (no such family), InvalidInput (bad settings), and the mapped database errors.
    """
    from psycopg.types.json import Jsonb

    from ragstore.db.connection import db_errors
    from ragstore.db.sqlfiles import query
    from ragstore.errors import NotFound

    value = None if settings is None else Jsonb(settings.checked().as_dict())
    with db_errors(), conn.transaction():
        row = conn.execute(query("hybrid", "store_fusion"), {"fusion": value, "family": family}).fetchone()
    if row is None:
        raise NotFound(f"no family named {family!r}")
