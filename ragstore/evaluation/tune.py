"""Per-family tuning of hybrid fusion: a grid of settings, scored by k-fold cross-validation.

Promises of :func:`tune`:

- Each query's candidates are fetched ONCE at the deepest ``per_leg`` of the grid
  (:func:`ragstore.search.hybrid.fusion_candidates`: both legs' lists with ranks and both scores); every
  setting of the grid is then fused in numpy (:func:`ragstore.search.fusion.fuse`, the same arithmetic as
  the SQL statement), so a grid of a hundred settings costs one search per query.
- The grid: fusion ``rrf`` (rrf_k 60) and ``cc`` with each normalisation and each ``alpha``, at each
  ``per_leg`` (the default's 20 unless more are asked for); plus the two single legs as references
  (never chosen: a tuned family stays hybrid).
- The selection rule (:func:`select`), the paired standard-error rule: on the training queries, each
  setting's per-query nDCG@k difference against the default; the setting with the best mean gain is
  chosen only when that gain is positive and exceeds ``min_gain_se`` (default 1) standard errors of its
  differences; otherwise the default is kept. The argmax over a grid of a hundred settings on a few
  hundred queries picks winners by noise; this rule departs from the default only on evidence.
  ``min_gain_se`` 0 is the plain argmax (ties still go to the default).
- Cross-validation: the queries are split into ``folds`` folds (a seeded shuffle); for each fold the
  rule is applied to the OTHER folds and its choice scored on the fold. ``held_out`` is the mean of
  those fold scores over all queries: the score to expect of the procedure on new queries of the same
  kind, not a training score; ``default_held_out`` is the default's on the same queries. ``chosen`` is
  the SAME rule applied to all queries (what gets stored), so the held-out figure measures exactly the
  procedure that produces the stored setting. The report says, per fold, what was chosen, whether the
  default was kept, the best candidate's training gain ± its standard error, and both held-out scores.
- Queries without a relevant judgement are skipped (counted in ``skipped``). The default is always in
  the grid (first; :func:`with_default`), and ties between settings go to the earlier one in grid
  order, so tuning never moves away from the default for nothing.

Raises InvalidInput (fewer queries than folds, folds < 2, an empty grid, a negative or non-finite
``min_gain_se``) and whatever the search raises.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ragstore.common.fields import fields_dict
from ragstore.db.connection import Conn
from ragstore.errors import InvalidInput
from ragstore.evaluation.datasets import Qrels, Query
from ragstore.evaluation.metrics import ndcg_at_k
from ragstore.families import Family
from ragstore.search.fusion import DEFAULT_FUSION, NORMALIZATIONS, Candidate, FusionSettings, fuse

__all__ = [
    "MIN_GAIN_SE",
    "PER_LEGS",
    "CrossValidation",
    "FoldResult",
    "Selection",
    "TuneReport",
    "Tuned",
    "cross_validate",
    "cross_validate_scores",
    "default_grid",
    "fetch_candidates",
    "fold_assignment",
    "score_grid",
    "select",
    "tune",
    "tune_family",
    "with_default",
]

ALPHAS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
# Only the default's depth: on the three eval sets another depth adds at most +0.0003 nDCG@10 to the best
# setting, and the default's own depth variants, near-copies that differ on a handful of queries, clear
# one standard error by chance (benchmarks/README.md, "Retrieval quality and hybrid latency").
# default_grid(per_legs=...) or `family tune --per-leg` add depths.
PER_LEGS = (DEFAULT_FUSION.per_leg,)
MIN_GAIN_SE = 1.0


def default_grid(per_legs: Sequence[int] = PER_LEGS, alphas: Sequence[float] = ALPHAS) -> list[FusionSettings]:
    """The default first, then rrf and every cc normalisation × alpha, at each per_leg (by default the
    default's depth only: 22 settings)."""
    grid = [DEFAULT_FUSION]
    for n in per_legs:
        grid.append(FusionSettings(fusion="rrf", per_leg=n))
        for norm in NORMALIZATIONS:
            grid += [FusionSettings(fusion="cc", normalization=norm, alpha=a, per_leg=n) for a in alphas]
    seen: set[FusionSettings] = set()
    return [s for s in grid if not (s in seen or seen.add(s))]  # type: ignore[func-returns-value]


@dataclass
class TuneReport:
    """What tuning found. Scores are mean nDCG@k over the evaluated queries; gains are over the default.

    ``chosen`` is the rule applied to all queries (what ``family tune`` stores), ``kept_default`` whether
    that is the default, ``best`` the candidate with the best mean gain and ``gain`` ± ``gain_se`` that
    gain (the evidence the rule weighed). ``held_out`` is the cross-validated score of the same rule,
    ``default_held_out`` the default's on the same folds (equal to ``untuned``: the default is not
    fitted). ``grid`` names the rows that ``per_fold`` indexes.
    """

    family: str
    k: int
    queries: int
    skipped: int
    folds: int
    min_gain_se: float
    chosen: FusionSettings
    kept_default: bool
    best: FusionSettings
    gain: float
    gain_se: float
    chosen_score: float
    held_out: float
    default_held_out: float
    untuned: float
    fts_only: float
    vector_only: float
    grid: list[FusionSettings] = field(default_factory=list)
    per_fold: list[FoldResult] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        ndcg = {
            "chosen_train": self.chosen_score,
            "held_out": self.held_out,
            "default_held_out": self.default_held_out,
            "untuned": self.untuned,
            "fts_only": self.fts_only,
            "vector_only": self.vector_only,
        }
        return {
            **fields_dict(self, "family", "k", "queries", "skipped", "folds", "min_gain_se", "kept_default"),
            "settings_tried": len(self.grid),
            "chosen": self.chosen.as_dict(),
            "best_candidate": self.best.label,
            "train_gain": _rounded(self.gain),
            "train_gain_se": _rounded(self.gain_se),
            **{f"{name}_ndcg": round(score, 4) for name, score in ndcg.items()},
            "per_fold": [
                {
                    "fold": n + 1,
                    "queries": f.queries,
                    "chosen": self.grid[f.chosen].label,
                    "kept_default": f.kept_default,
                    "best_candidate": self.grid[f.best].label,
                    "train_gain": _rounded(f.gain),
                    "train_gain_se": _rounded(f.gain_se),
                    "held_out_ndcg": round(f.held_out, 4),
                    "default_held_out_ndcg": round(f.default_held_out, 4),
                }
                for n, f in enumerate(self.per_fold)
            ],
        }


def _rounded(x: float) -> float | None:
    """Rounded for JSON; None for an infinite standard error (one training query)."""
    return round(x, 4) if math.isfinite(x) else None


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
    min_gain_se: float = MIN_GAIN_SE,
    grid: Sequence[FusionSettings] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> TuneReport:
    """Choose fusion settings for ``family`` on these queries; see the module docstring. Nothing is stored."""
    from ragstore.families import get_family

    if grid is not None and not grid:
        raise InvalidInput("the tuning grid is empty")
    settings = with_default([s.checked() for s in (grid or default_grid())])
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise InvalidInput(f"folds must be an integer of at least 2, got {folds!r}")
    if (
        isinstance(min_gain_se, bool)
        or not isinstance(min_gain_se, int | float)
        or not math.isfinite(min_gain_se)
        or min_gain_se < 0
    ):
        raise InvalidInput(f"min_gain_se must be a number of at least 0, got {min_gain_se!r}")
    fam = get_family(conn, family)
    judged = [q for q in queries if any(g > 0 for g in qrels.get(q.query_id, {}).values())]
    if len(judged) < folds:
        raise InvalidInput(
            f"tuning needs at least {folds} queries with a relevant judgement (one per fold), got {len(judged)}"
        )
    candidates = fetch_candidates(conn, fam, judged, depth=max(s.per_leg for s in settings), progress=progress)
    return cross_validate(
        fam.name,
        candidates,
        qrels,
        settings,
        k=k,
        folds=folds,
        seed=seed,
        min_gain_se=float(min_gain_se),
        asked=len(queries),
    )


@dataclass(frozen=True)
class Tuned:
    """What :func:`tune_family` did: the report, and whether its choice is now stored on the family."""

    report: TuneReport
    stored: bool

    def as_dict(self) -> dict[str, Any]:
        return self.report.as_dict() | {"stored": self.stored}


def tune_family(
    conn: Conn,
    family: str,
    queries: Sequence[Query],
    qrels: Qrels,
    *,
    k: int = 10,
    folds: int = 5,
    seed: int = 0,
    min_gain_se: float = MIN_GAIN_SE,
    per_legs: Sequence[int] = (),
    dry_run: bool = False,
) -> Tuned:
    """:func:`tune` ``family`` on the default grid (plus the depths ``per_legs``), then store the choice
    (``ragstore family tune``): the rule's choice is stored when it is not the default and does not lose
    held out against the default; otherwise the family goes back to the default (an earlier tuning is
    forgotten). With ``dry_run`` nothing is stored (``stored`` is False)."""
    from ragstore.search.fusion import store_settings

    grid = default_grid(per_legs=sorted({*PER_LEGS, *per_legs}))
    report = tune(conn, family, queries, qrels, k=k, folds=folds, seed=seed, min_gain_se=min_gain_se, grid=grid)
    keep = not report.kept_default and report.held_out >= report.default_held_out - 1e-12
    if not dry_run:
        store_settings(conn, family, report.chosen if keep else None)
        conn.commit()  # outside autocommit the searches' transaction holds the change until here
    return Tuned(report, keep and not dry_run)


def fetch_candidates(
    conn: Conn,
    fam: Family,
    queries: Sequence[Query],
    *,
    depth: int,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, list[Candidate]]:
    """Every query's hybrid candidates at ``depth`` per leg (queries embedded in batches first)."""
    from ragstore.families import backend_for
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
    min_gain_se: float = MIN_GAIN_SE,
    asked: int | None = None,
) -> TuneReport:
    """The cross-validated choice among ``settings`` on fetched candidates (module docstring)."""
    settings = with_default(settings)
    qids, matrix, legs = score_grid(candidates, qrels, settings, k)
    cv = cross_validate_scores(matrix, settings, folds=folds, seed=seed, min_gain_se=min_gain_se)
    return TuneReport(
        family=family,
        k=k,
        queries=len(qids),
        skipped=(len(candidates) if asked is None else asked) - len(qids),
        folds=folds,
        min_gain_se=min_gain_se,
        chosen=settings[cv.chosen],
        kept_default=cv.kept_default,
        best=settings[cv.best],
        gain=cv.gain,
        gain_se=cv.gain_se,
        chosen_score=float(matrix[cv.chosen].mean()),
        held_out=cv.held_out,
        default_held_out=cv.default_held_out,
        untuned=float(matrix[0].mean()),
        fts_only=float(np.mean(legs["fts"])),
        vector_only=float(np.mean(legs["vector"])),
        grid=settings,
        per_fold=cv.folds,
    )


def with_default(settings: Sequence[FusionSettings]) -> list[FusionSettings]:
    """The grid with :data:`~ragstore.search.fusion.DEFAULT_FUSION` first (the rule's reference)."""
    return [DEFAULT_FUSION] + [s for s in settings if s != DEFAULT_FUSION]


def fold_assignment(n: int, folds: int, seed: int) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Each of ``n`` queries' fold: a seeded shuffle dealt round-robin (fold sizes differ by at most one)."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    fold_of = np.empty(n, dtype=np.int64)
    for position, index in enumerate(order):
        fold_of[index] = position % folds
    return fold_of


@dataclass(frozen=True)
class Selection:
    """The selection rule applied to one set of training queries (rows index the grid)."""

    chosen: int
    best: int
    gain: float
    gain_se: float

    @property
    def kept_default(self) -> bool:
        return self.chosen != self.best or self.gain <= 0.0


def select(scores: np.ndarray[Any, np.dtype[np.float64]], default: int, min_gain_se: float = MIN_GAIN_SE) -> Selection:
    """The paired standard-error rule on training scores ``[setting, query]``.

    ``best`` is the row with the best mean per-query gain over row ``default`` (the first of equals, so
    a row equal to the default never beats it); ``gain`` that mean and ``gain_se`` its standard error
    (the sample standard deviation of the per-query differences over √queries; infinite with one query).
    ``best`` is chosen only when ``gain > 0`` and ``gain > min_gain_se × gain_se``; otherwise the default
    row. ``min_gain_se`` 0 is the plain argmax.
    """
    diffs = scores - scores[default]
    gains = diffs.mean(axis=1)
    best = int(np.argmax(gains))
    gain = float(gains[best])
    n = scores.shape[1]
    se = float(diffs[best].std(ddof=1)) / math.sqrt(n) if n > 1 else math.inf
    # The relative slack keeps rounding from deciding a tie: a candidate that differs on one query only
    # is exactly one standard error up (d/n against (d/√n)/√n), which is no evidence.
    depart = gain > 0.0 and (min_gain_se == 0.0 or gain > min_gain_se * se * (1.0 + 1e-9))
    return Selection(chosen=best if depart else default, best=best, gain=gain, gain_se=se)


@dataclass(frozen=True)
class FoldResult(Selection):
    """One fold: the rule applied to the other folds' queries (the :class:`Selection` fields: ``gain`` ±
    ``gain_se`` on those training queries), then the choice and the default scored on this fold's."""

    queries: int
    held_out: float
    default_held_out: float


@dataclass(frozen=True)
class CrossValidation(Selection):
    """The selection rule cross-validated on a score matrix: the rule applied to all queries (the
    :class:`Selection` fields; ``chosen`` is what gets stored), the held-out means over all queries, and
    per fold."""

    held_out: float
    default_held_out: float
    folds: list[FoldResult]


def cross_validate_scores(
    matrix: np.ndarray[Any, np.dtype[np.float64]],
    settings: Sequence[FusionSettings],
    *,
    folds: int = 5,
    seed: int = 0,
    min_gain_se: float = MIN_GAIN_SE,
) -> CrossValidation:
    """:func:`select` cross-validated on a score matrix ``[setting, query]`` (``settings`` names its rows;
    the reference is :data:`~ragstore.search.fusion.DEFAULT_FUSION`'s row, else the first)."""
    default = settings.index(DEFAULT_FUSION) if DEFAULT_FUSION in settings else 0
    fold_of = fold_assignment(matrix.shape[1], folds, seed)
    held = np.zeros(matrix.shape[1], dtype=np.float64)
    results: list[FoldResult] = []
    for f in range(folds):
        train, test = fold_of != f, fold_of == f
        pick = select(matrix[:, train], default, min_gain_se)
        held[test] = matrix[pick.chosen, test]
        scored = (float(matrix[pick.chosen, test].mean()), float(matrix[default, test].mean()))
        results.append(
            FoldResult(**asdict(pick), queries=int(test.sum()), held_out=scored[0], default_held_out=scored[1])
        )
    return CrossValidation(
        **asdict(select(matrix, default, min_gain_se)),
        held_out=float(held.mean()),
        default_held_out=float(matrix[default].mean()),
        folds=results,
    )
