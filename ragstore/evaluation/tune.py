"""Per-family tuning of hybrid fusion: a grid of settings, scored by k-fold cross-validation.

Promises of :func:`tune`:

- Each query's candidates are fetched ONCE at the deepest ``per_leg`` of the grid
  (:func:`ragstore.search.hybrid.fusion_candidates`: both legs' lists with ranks and both scores); every
  setting of the grid is then fused in numpy (:func:`ragstore.search.fusion.fuse`, the same arithmetic as
  the SQL statement), so a grid of a hundred settings costs one search per query.
- The grid: fusion ``rrf`` (rrf_k 60) and ``cc`` with each normalisation and each ``alpha``, at each
  ``per_leg``; plus the two single legs as references (never chosen: a tuned family stays hybrid).
- Cross-validation: the queries are split into ``folds`` folds (a seeded shuffle); for each fold the
  setting with the best mean nDCG@k on the OTHER folds is scored on the fold. ``held_out`` is the mean
  of those fold scores over all queries: the score to expect on new queries of the same kind, not the
  training score. ``chosen`` is the best setting on all queries (what gets stored), ``untuned`` the
  score of :data:`~ragstore.search.fusion.DEFAULT_FUSION` on all queries.
- Queries without a relevant judgement are skipped (counted in ``skipped``). Ties between settings go
  to the earlier one in grid order (the default comes first), so tuning never moves away from the
  default for nothing.

Raises InvalidInput (fewer queries than folds, folds < 2, an empty grid) and whatever the search raises.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragstore.common.fields import fields_dict
from ragstore.db.connection import Conn
from ragstore.errors import InvalidInput
from ragstore.evaluation.datasets import Qrels, Query
from ragstore.evaluation.metrics import ndcg_at_k
from ragstore.families import Family
from ragstore.search.fusion import DEFAULT_FUSION, NORMALIZATIONS, Candidate, FusionSettings, fuse

__all__ = ["TuneReport", "cross_validate", "default_grid", "fetch_candidates", "score_grid", "tune"]

ALPHAS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
PER_LEGS = (30, 50, 100)


def default_grid(per_legs: Sequence[int] = PER_LEGS, alphas: Sequence[float] = ALPHAS) -> list[FusionSettings]:
    """The default first, then rrf and every cc normalisation × alpha, at each per_leg."""
    grid = [DEFAULT_FUSION]
    for n in per_legs:
        grid.append(FusionSettings(fusion="rrf", per_leg=n))
        for norm in NORMALIZATIONS:
            grid += [FusionSettings(fusion="cc", normalization=norm, alpha=a, per_leg=n) for a in alphas]
    seen: set[FusionSettings] = set()
    return [s for s in grid if not (s in seen or seen.add(s))]  # type: ignore[func-returns-value]


@dataclass
class TuneReport:
    """What tuning found. Scores are mean nDCG@k over the evaluated queries."""

    family: str
    k: int
    queries: int
    skipped: int
    folds: int
    chosen: FusionSettings
    chosen_score: float
    held_out: float
    untuned: float
    fts_only: float
    vector_only: float
    per_fold: list[tuple[str, float]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        ndcg = {
            "chosen_train": self.chosen_score,
            "held_out": self.held_out,
            "untuned": self.untuned,
            "fts_only": self.fts_only,
            "vector_only": self.vector_only,
        }
        return {
            **fields_dict(self, "family", "k", "queries", "skipped", "folds"),
            "chosen": self.chosen.as_dict(),
            **{f"{name}_ndcg": round(score, 4) for name, score in ndcg.items()},
            "per_fold": [{"chosen": label, "ndcg": round(score, 4)} for label, score in self.per_fold],
        }


def _leg_ranking(cands: Sequence[Candidate], leg: str, k: int) -> list[str]:
    ranked = [(c.fts_rank if leg == "fts" else c.vector_rank, c.chunk_id) for c in cands]
    return [cid for rank, cid in sorted((r, cid) for r, cid in ranked if r is not None)][:k]


def score_grid(
    candidates: dict[str, list[Candidate]], qrels: Qrels, grid: Sequence[FusionSettings], k: int
) -> tuple[list[str], np.ndarray[Any, np.dtype[np.float64]], dict[str, list[float]]]:
    """``(query ids, matrix[setting, query] of nDCG@k, single legs' per-query nDCG@k)``."""
    qids = [q for q in candidates if any(g > 0 for g in qrels.get(q, {}).values())]
    matrix = np.zeros((len(grid), len(qids)), dtype=np.float64)
    for j, qid in enumerate(qids):
        judged = qrels[qid]
        for i, setting in enumerate(grid):
            ranking = [cid for cid, _ in fuse(candidates[qid], setting)[:k]]
            matrix[i, j] = ndcg_at_k(ranking, judged, k)
    legs = {
        leg: [ndcg_at_k(_leg_ranking(candidates[q], leg, k), qrels[q], k) for q in qids] for leg in ("fts", "vector")
    }
    return qids, matrix, legs


def tune(
    conn: Conn,
    family: str,
    queries: Sequence[Query],
    qrels: Qrels,
    *,
    k: int = 10,
    folds: int = 5,
    seed: int = 0,
    grid: Sequence[FusionSettings] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> TuneReport:
    """Choose fusion settings for ``family`` on these queries; see the module docstring. Nothing is stored."""
    from ragstore.families import get_family

    settings = list(grid or default_grid())
    if not settings:
        raise InvalidInput("the tuning grid is empty")
    for s in settings:
        s.checked()
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise InvalidInput(f"folds must be an integer of at least 2, got {folds!r}")
    fam = get_family(conn, family)
    judged = [q for q in queries if any(g > 0 for g in qrels.get(q.query_id, {}).values())]
    if len(judged) < folds:
        raise InvalidInput(
            f"tuning needs at least {folds} queries with a relevant judgement (one per fold), got {len(judged)}"
        )
    candidates = fetch_candidates(conn, fam, judged, depth=max(s.per_leg for s in settings), progress=progress)
    return cross_validate(fam.name, candidates, qrels, settings, k=k, folds=folds, seed=seed, asked=len(queries))


def fetch_candidates(
    conn: Conn,
    fam: Family,
    queries: Sequence[Query],
    *,
    depth: int,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, list[Candidate]]:
    """Every query's hybrid candidates at ``depth`` per leg (queries embedded in batches first)."""
    from ragstore.ingest.run import backend_for
    from ragstore.search.hybrid import fusion_candidates

    backend = backend_for(fam)
    texts = [q.text for q in queries]
    vectors = np.concatenate([backend.embed(texts[i : i + 64]) for i in range(0, len(texts), 64)])
    candidates: dict[str, list[Candidate]] = {}
    for n, (q, vector) in enumerate(zip(queries, vectors, strict=True)):
        candidates[q.query_id] = fusion_candidates(conn, fam, q.text, vector, per_leg=depth)
        if progress is not None:
            progress(n + 1, len(queries))
    return candidates


def cross_validate(
    family: str,
    candidates: dict[str, list[Candidate]],
    qrels: Qrels,
    settings: Sequence[FusionSettings],
    *,
    k: int = 10,
    folds: int = 5,
    seed: int = 0,
    asked: int | None = None,
) -> TuneReport:
    """The cross-validated choice among ``settings`` on fetched candidates (module docstring)."""
    qids, matrix, legs = score_grid(candidates, qrels, settings, k)
    cv = cross_validate_scores(matrix, settings, folds=folds, seed=seed)
    means = matrix.mean(axis=1)
    default_index = settings.index(DEFAULT_FUSION) if DEFAULT_FUSION in settings else None
    untuned = float(means[default_index]) if default_index is not None else float("nan")
    return TuneReport(
        family=family,
        k=k,
        queries=len(qids),
        skipped=(len(candidates) if asked is None else asked) - len(qids),
        folds=folds,
        chosen=settings[cv.chosen],
        chosen_score=float(means[cv.chosen]),
        held_out=cv.held_out,
        untuned=untuned,
        fts_only=float(np.mean(legs["fts"])),
        vector_only=float(np.mean(legs["vector"])),
        per_fold=[(settings[f.chosen].label, f.held_out) for f in cv.folds],
    )


def fold_assignment(n: int, folds: int, seed: int) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Each of ``n`` queries' fold: a seeded shuffle dealt round-robin (fold sizes differ by at most one)."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    fold_of = np.empty(n, dtype=np.int64)
    for position, index in enumerate(order):
        fold_of[index] = position % folds
    return fold_of


@dataclass(frozen=True)
class FoldResult:
    """One fold: the row chosen on the other folds, and the mean scores on this fold's queries."""

    chosen: int
    queries: int
    held_out: float
    default_held_out: float


@dataclass(frozen=True)
class CrossValidation:
    """Cross-validation of the selection on a score matrix: held-out means over all queries, per fold."""

    held_out: float
    default_held_out: float
    folds: list[FoldResult]
    chosen: int


def cross_validate_scores(
    matrix: np.ndarray[Any, np.dtype[np.float64]],
    settings: Sequence[FusionSettings],
    *,
    folds: int = 5,
    seed: int = 0,
) -> CrossValidation:
    """Cross-validation on a score matrix ``[setting, query]`` (``settings`` names its rows)."""
    default = settings.index(DEFAULT_FUSION) if DEFAULT_FUSION in settings else 0
    fold_of = fold_assignment(matrix.shape[1], folds, seed)
    held = np.zeros(matrix.shape[1], dtype=np.float64)
    results: list[FoldResult] = []
    for f in range(folds):
        train, test = fold_of != f, fold_of == f
        best = int(np.argmax(matrix[:, train].mean(axis=1)))  # argmax: the first of equals (grid order)
        held[test] = matrix[best, test]
        results.append(
            FoldResult(best, int(test.sum()), float(matrix[best, test].mean()), float(matrix[default, test].mean()))
        )
    return CrossValidation(
        held_out=float(held.mean()),
        default_held_out=float(matrix[default].mean()),
        folds=results,
        chosen=int(np.argmax(matrix.mean(axis=1))),
    )
