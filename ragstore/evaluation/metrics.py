"""Retrieval metrics: pure functions over rankings and graded relevance judgements (qrels).

Summarised in docs/decisions.md, "Evaluation metrics".

Terms. A *ranking* is the list of chunk ids a search returned for one query, best first; it holds each
id at most once. The *qrels* of a query map chunk ids to integer or real grades; a chunk is *relevant*
when its grade is > 0, and a chunk the qrels do not mention has grade 0. ``R`` is the set of relevant
chunks and ``top_k`` the first ``k`` ids of the ranking (fewer if the ranking is shorter). Ranks are
1-based.

Definitions, per query:

- ``recall@k    = |top_k ∩ R| / |R|``
- ``precision@k = |top_k ∩ R| / k`` — divided by ``k``, not by ``len(top_k)``: a ranking that returns
  fewer than ``k`` ids is not rewarded for it (as ``P_k`` in trec_eval).
- ``MRR@k       = 1 / rank`` of the first relevant id in ``top_k``, 0 when there is none.
- ``hit@k       = 1`` when ``top_k`` holds at least one relevant id, else 0.
- ``nDCG@k      = DCG@k / IDCG@k`` with graded gains and a log2 discount:
  ``DCG@k = Σ_{i=1..|top_k|} gain(id_i) / log2(i + 1)`` where ``gain`` is the grade clamped at 0
  (negative "harmful" grades count as 0), and ``IDCG@k`` is the same sum over the qrels' positive
  grades sorted descending and cut to ``k`` — the best ranking the judgements allow.

Aggregation (:func:`evaluate`): each metric is macro-averaged — the mean over queries of the per-query
values — over the queries that have at least one relevant chunk. A query with no relevant chunk (all
grades <= 0, or a ranked query absent from the qrels) is skipped and counted, since every metric is
undefined or trivially 0 there. A judged query with no ranking counts as zeros for every metric. A
ranking that lists an id twice is an error, for any query, because it would inflate every metric.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ragstore.errors import InvalidInput

__all__ = [
    "METRICS",
    "QueryScores",
    "Report",
    "evaluate",
    "hit_at_k",
    "mrr_at_k",
    "ndcg_at_k",
    "precision_at_k",
    "recall_at_k",
    "score_query",
]

Judgements = Mapping[str, float]
"""One query's judgements: chunk_id -> grade (relevant when > 0)."""

#: the metric names, in the order reports print them
METRICS = ("recall", "precision", "mrr", "ndcg", "hit")


@dataclass(frozen=True, slots=True)
class QueryScores:
    """The five metrics of one query at one ``k``."""

    recall: float
    precision: float
    mrr: float
    ndcg: float
    hit: float

    def as_dict(self) -> dict[str, float]:
        """The metrics by name, in :data:`METRICS` order."""
        return {name: getattr(self, name) for name in METRICS}


_ZERO = QueryScores(recall=0.0, precision=0.0, mrr=0.0, ndcg=0.0, hit=0.0)


@dataclass(frozen=True, slots=True)
class Report:
    """Macro-averaged metrics over the evaluated queries, and what was skipped.

    ``evaluated``: queries with at least one relevant chunk (the denominator of every mean).
    ``skipped``: query ids with no relevant chunk, sorted. ``unranked``: evaluated query ids that had no
    ranking (scored as zeros), sorted. ``per_query``: each evaluated query's scores.
    """

    k: int
    evaluated: int
    recall: float
    precision: float
    mrr: float
    ndcg: float
    hit: float
    skipped: tuple[str, ...] = ()
    unranked: tuple[str, ...] = ()
    per_query: dict[str, QueryScores] = field(default_factory=dict, repr=False)

    def as_dict(self) -> dict[str, float]:
        """The averaged metrics by name, in :data:`METRICS` order."""
        return {name: getattr(self, name) for name in METRICS}


def recall_at_k(ranking: Sequence[str], qrels: Judgements, k: int) -> float:
    """``|top_k ∩ R| / |R|``; 0.0 when nothing is relevant. Raises as :func:`score_query` does."""
    return _score(ranking, qrels, k).recall


def precision_at_k(ranking: Sequence[str], qrels: Judgements, k: int) -> float:
    """``|top_k ∩ R| / k``. Raises as :func:`score_query` does."""
    return _score(ranking, qrels, k).precision


def mrr_at_k(ranking: Sequence[str], qrels: Judgements, k: int) -> float:
    """``1 / rank`` of the first relevant id in the top ``k``, else 0. Raises as :func:`score_query` does."""
    return _score(ranking, qrels, k).mrr


def ndcg_at_k(ranking: Sequence[str], qrels: Judgements, k: int) -> float:
    """Graded nDCG@k: gain = grade (clamped at 0), discount log2(rank + 1); 0.0 when nothing is relevant.

    Raises as :func:`score_query` does.
    """
    return _score(ranking, qrels, k).ndcg


def hit_at_k(ranking: Sequence[str], qrels: Judgements, k: int) -> float:
    """1.0 when a relevant id is in the top ``k``, else 0.0. Raises as :func:`score_query` does."""
    return _score(ranking, qrels, k).hit


def score_query(ranking: Sequence[str], qrels: Judgements, k: int, query_id: str | None = None) -> QueryScores:
    """All five metrics of one query (definitions in the module docstring).

    A query with no relevant chunk scores 0 everywhere (:func:`evaluate` skips such queries instead).
    Raises :class:`~ragstore.errors.InvalidInput` when ``k`` is not a positive integer, a grade is not a
    finite number, or the ranking lists an id twice (the message names ``query_id`` when given).
    """
    return _score(ranking, qrels, k, query_id)


def evaluate(rankings: Mapping[str, Sequence[str]], qrels: Mapping[str, Judgements], k: int) -> Report:
    """Macro-average every metric at ``k`` over the queries with at least one relevant chunk.

    The queries considered are those of ``qrels`` and of ``rankings`` together. Queries with no relevant
    chunk are skipped and listed in ``Report.skipped``; judged queries missing from ``rankings`` score
    zeros and are listed in ``Report.unranked``. Means use :func:`math.fsum` over query ids in sorted
    order, so the report does not depend on mapping order.

    Raises :class:`~ragstore.errors.InvalidInput` when ``k`` is not a positive integer, a ranking lists
    an id twice (naming the query), a grade is not a finite number (naming the query), or no query has
    a relevant chunk (nothing to average: most likely queries and qrels from different sets).
    """
    _check_k(k)
    for query_id in sorted(rankings):
        _check_unique(rankings[query_id], query_id)
    per_query: dict[str, QueryScores] = {}
    skipped: list[str] = []
    unranked: list[str] = []
    for query_id in sorted(set(qrels) | set(rankings)):
        judged = qrels.get(query_id, {})
        if not _relevant(judged, query_id):
            skipped.append(query_id)
            continue
        ranking = rankings.get(query_id)
        if ranking is None:
            unranked.append(query_id)
            per_query[query_id] = _ZERO
        else:
            per_query[query_id] = _score(ranking, judged, k, query_id)
    if not per_query:
        raise InvalidInput(
            f"no query has a relevant chunk (grade > 0): {len(skipped)} queries skipped, nothing to evaluate"
        )
    scores = list(per_query.values())

    def mean(name: str) -> float:
        return math.fsum(getattr(s, name) for s in scores) / len(scores)

    return Report(
        k=k,
        evaluated=len(scores),
        recall=mean("recall"),
        precision=mean("precision"),
        mrr=mean("mrr"),
        ndcg=mean("ndcg"),
        hit=mean("hit"),
        skipped=tuple(skipped),
        unranked=tuple(unranked),
        per_query=per_query,
    )


def _score(ranking: Sequence[str], qrels: Judgements, k: int, query_id: str | None = None) -> QueryScores:
    _check_k(k)
    _check_unique(ranking, query_id)
    relevant = _relevant(qrels, query_id)
    if not relevant:
        return _ZERO
    top = ranking[:k]
    found = [i for i, chunk_id in enumerate(top, start=1) if chunk_id in relevant]
    dcg = math.fsum(relevant[top[i - 1]] / math.log2(i + 1) for i in found)
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = math.fsum(grade / math.log2(i + 1) for i, grade in enumerate(ideal, start=1))
    return QueryScores(
        recall=len(found) / len(relevant),
        precision=len(found) / k,
        mrr=1.0 / found[0] if found else 0.0,
        ndcg=dcg / idcg,
        hit=1.0 if found else 0.0,
    )


def _relevant(qrels: Judgements, query_id: str | None) -> dict[str, float]:
    """The relevant chunks (grade > 0) with their grades as gains; checks every grade is finite."""
    relevant: dict[str, float] = {}
    for chunk_id, grade in qrels.items():
        if isinstance(grade, bool) or not isinstance(grade, int | float) or not math.isfinite(grade):
            where = "" if query_id is None else f"query {query_id!r}: "
            raise InvalidInput(f"{where}grade of chunk {chunk_id!r} must be a finite number, got {grade!r}")
        if grade > 0:
            relevant[chunk_id] = float(grade)
    return relevant


def _check_unique(ranking: Sequence[str], query_id: str | None) -> None:
    seen: set[str] = set()
    for rank, chunk_id in enumerate(ranking, start=1):
        if chunk_id in seen:
            where = "the ranking" if query_id is None else f"the ranking of query {query_id!r}"
            raise InvalidInput(f"{where} lists chunk {chunk_id!r} twice (again at rank {rank})")
        seen.add(chunk_id)


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInput(f"k must be a positive integer, got {k!r}")
