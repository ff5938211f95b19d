"""The eval runner behind ``ragstore eval``: run queries against a family in several modes and score them.

Promises of :func:`run_eval`:

- Every mode goes through :func:`ragstore.search.api.search`, the call ``ragstore search`` makes, so the
  figures are what users get. One exception, for speed: plain ``exact`` ranks every query in streamed
  passes over the family (:func:`ragstore.search.exact.top_k_many`, the same cosine and order), and its
  latency columns time real one-query exact searches on the first 100 queries. Two variants the API
  does not expose go to the same library functions it calls: a hybrid with leg ``weights``
  (:func:`ragstore.search.hybrid.hybrid_search`) and ``rerank="blend"``
  (:func:`ragstore.search.hybrid.blended_search`, with ``now`` taken once per run).
- ``rerank="cross"`` sends each query's top ``rerank_depth`` first-stage hits to ``reranker``
  (:func:`ragstore.search.rerank.cross_rerank`, as ``search`` does); its latency includes the reranker.
- The queries are embedded ONCE, in batches, by the family's own backend before any mode runs; the
  searches get them through a cache with the same backend identity. ``embed_seconds`` reports that cost;
  per-query latency is the search call alone (database + fusion + rerank), measured with ``clock``.
- Metrics come from :func:`ragstore.evaluation.metrics.evaluate` at ``k`` (macro averages; queries
  without a relevant chunk skipped and counted). Latency: mean and p95 (nearest rank) in milliseconds.
- Deltas are each mode's metric minus the first mode's (A/B against the first mode).

Raises InvalidInput (no modes, an unknown mode or rerank, weights on a non-hybrid mode, k), NotFound
(family), and whatever the search raises.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np
import psycopg

from ragstore.caches import caches_for
from ragstore.common.stats import p95
from ragstore.db.connection import Conn
from ragstore.embed.base import Backend, Matrix
from ragstore.errors import InvalidInput
from ragstore.evaluation.datasets import Qrels, Query
from ragstore.evaluation.metrics import METRICS, Report, evaluate
from ragstore.families import Family, backend_for, get_family
from ragstore.search import hybrid
from ragstore.search.api import MODES
from ragstore.search.api import search as api_search
from ragstore.search.fusion import FusionSettings
from ragstore.search.request import Hit
from ragstore.search.rerank import DEFAULT_DEPTH, Reranker

__all__ = ["MODES", "RERANKS", "EvalResult", "ModeResult", "ModeSpec", "format_table", "p95", "run_eval"]

RERANKS = ("mmr", "blend", "cross")
EMBED_BATCH = 64
# Exact mode scores all queries in streamed passes (this many queries per pass) and times real
# one-query exact searches on the first EXACT_LATENCY_SAMPLE queries for the latency columns.
EXACT_QUERY_GROUP = 256
EXACT_LATENCY_SAMPLE = 100


@dataclass(frozen=True)
class ModeSpec:
    """One configuration to evaluate: a search mode, an optional rerank, optional hybrid leg weights."""

    mode: str
    rerank: str | None = None
    weights: Mapping[str, float] | None = None

    @property
    def label(self) -> str:
        text = self.mode
        if self.weights:
            text += "[" + ",".join(f"{leg}={w:g}" for leg, w in sorted(self.weights.items())) + "]"
        return text + (f"+{self.rerank}" if self.rerank else "")

    def check(self) -> None:
        if self.mode not in MODES:
            raise InvalidInput(f"unknown eval mode {self.mode!r}: use one of {', '.join(MODES)}")
        if self.rerank is not None and self.rerank not in RERANKS:
            raise InvalidInput(f"unknown rerank {self.rerank!r}: use one of {', '.join(RERANKS)}")
        if self.weights and self.mode != "hybrid":
            raise InvalidInput(f"leg weights apply to the hybrid mode only, not {self.mode!r}")
        if self.rerank == "blend" and self.mode != "hybrid":
            raise InvalidInput("the blend rerank re-ranks hybrid candidates: use it with --mode hybrid")


@dataclass
class ModeResult:
    """What one mode scored: the metrics report and the latency of each query's search call (ms)."""

    spec: ModeSpec
    report: Report
    latencies_ms: list[float] = field(repr=False)

    @property
    def mean_ms(self) -> float:
        return math.fsum(self.latencies_ms) / len(self.latencies_ms) if self.latencies_ms else 0.0

    @property
    def p95_ms(self) -> float:
        return p95(self.latencies_ms)

    @property
    def seconds(self) -> float:
        return math.fsum(self.latencies_ms) / 1000.0


@dataclass
class EvalResult:
    """Every mode's result, in the order asked; the first is the baseline of the deltas."""

    family: str
    k: int
    queries: int
    embed_seconds: float
    modes: list[ModeResult]

    def deltas(self, index: int) -> dict[str, float]:
        """Mode ``index``'s metrics minus the first mode's."""
        base = self.modes[0].report.as_dict()
        return {name: value - base[name] for name, value in self.modes[index].report.as_dict().items()}

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (no per-query data), stable key order when dumped with sort_keys."""
        return {
            "family": self.family,
            "k": self.k,
            "queries": self.queries,
            "embed_seconds": round(self.embed_seconds, 3),
            "modes": [
                {
                    "label": m.spec.label,
                    "mode": m.spec.mode,
                    "rerank": m.spec.rerank,
                    "weights": dict(m.spec.weights) if m.spec.weights else None,
                    "evaluated": m.report.evaluated,
                    "skipped": len(m.report.skipped),
                    "metrics": {name: round(v, 4) for name, v in m.report.as_dict().items()},
                    "deltas": {name: round(v, 4) for name, v in self.deltas(i).items()},
                    "latency_ms": {"mean": round(m.mean_ms, 3), "p95": round(m.p95_ms, 3)},
                    "seconds": round(m.seconds, 3),
                }
                for i, m in enumerate(self.modes)
            ],
        }


class _CachedBackend:
    """The family's backend identity, answering from vectors embedded up front (falls back to the model)."""

    def __init__(self, backend: Backend, cache: dict[str, Matrix]) -> None:
        self._backend = backend
        self._cache = cache
        self.name, self.model, self.dim = backend.name, backend.model, backend.dim

    def embed(self, texts: Sequence[str]) -> Matrix:
        missing = [t for t in texts if t not in self._cache]
        if missing:
            for text, row in zip(missing, self._backend.embed(missing), strict=True):
                self._cache[text] = row
        return np.ascontiguousarray(np.stack([self._cache[t] for t in texts]), dtype=np.float32)


def _exact_rankings(
    conn: Conn, family: Family, queries: Sequence[Query], backend: _CachedBackend, k: int
) -> dict[str, list[str]]:
    """Exact top ``k`` of every query, streaming the family once per group of queries.

    The same scores and order (score desc, chunk_id asc) as ``search(mode="exact")`` one query at a time,
    up to the last ulp of a BLAS product on exact ties.
    """
    from ragstore.search.exact import stream_batches, top_k_many
    from ragstore.search.request import make_filter

    out: dict[str, list[str]] = {}
    for start in range(0, len(queries), EXACT_QUERY_GROUP):
        group = queries[start : start + EXACT_QUERY_GROUP]
        vectors = backend.embed([q.text for q in group])
        with conn.transaction():  # the server-side cursor needs one; rolled back, the pass only reads
            ranked = top_k_many(stream_batches(conn, family, make_filter(None, None)), vectors, k)
            raise psycopg.Rollback()
        for q, best in zip(group, ranked, strict=True):
            out[q.query_id] = [chunk_id for _, chunk_id in best]
    return out


class Searcher(Protocol):
    """What :func:`run_eval` calls for a plain mode: :func:`ragstore.search.api.search`'s shape."""

    def __call__(
        self,
        conn: Conn,
        family: str,
        query: str | None = None,
        *,
        k: int = ...,
        mode: str = ...,
        rerank: str | None = ...,
        backend: Backend | None = ...,
        reranker: Reranker | None = ...,
        rerank_depth: int = ...,
    ) -> list[Hit]: ...


def run_eval(
    conn: Conn,
    family: str | Family,
    queries: Sequence[Query],
    qrels: Qrels,
    modes: Sequence[ModeSpec],
    *,
    k: int = 10,
    backend: Backend | None = None,
    clock: Callable[[], float] = time.perf_counter,
    now: datetime | None = None,
    per_leg: int | None = None,
    reranker: Reranker | None = None,
    rerank_depth: int = DEFAULT_DEPTH,
    search: Searcher = api_search,
) -> EvalResult:
    """Evaluate ``queries`` against ``family`` (its name, or the family read already) in every mode of
    ``modes`` (see the module docstring).

    ``backend`` overrides the family's recorded one (tests); ``now`` fixes the blend's "now" (default:
    the wall clock, read once); ``per_leg`` sets the hybrid N for weighted and blended runs;
    ``reranker`` and ``rerank_depth`` serve the ``cross`` rerank; ``search`` runs a plain mode
    (:func:`ragstore.search.api.search`; a test passes its own).
    """
    if not modes:
        raise InvalidInput("give at least one mode to evaluate")
    for spec in modes:
        spec.check()
    if reranker is None and any(spec.rerank == "cross" for spec in modes):
        raise InvalidInput("the cross rerank needs a reranker (--reranker-url)")
    fam = family if isinstance(family, Family) else get_family(conn, family)
    needs_vectors = any(spec.mode != "fts" for spec in modes)
    cache: dict[str, Matrix] = {}
    started = clock()
    real = backend if backend is not None else backend_for(fam, caches_for(conn))
    if needs_vectors:
        texts = list(dict.fromkeys(q.text for q in queries))
        for i in range(0, len(texts), EMBED_BATCH):
            batch = texts[i : i + EMBED_BATCH]
            for text, row in zip(batch, real.embed(batch), strict=True):
                cache[text] = row
    embed_seconds = clock() - started
    cached = _CachedBackend(real, cache)
    moment = now or datetime.now(UTC)
    leg_n = per_leg or hybrid.resolve_settings(fam).per_leg

    def run_one(spec: ModeSpec, text: str) -> list[str]:
        if spec.rerank == "blend":
            hits = hybrid.blended_search(conn, fam, text, cached.embed([text])[0], k=k, now=moment, per_leg=leg_n)
        elif spec.weights or (per_leg and spec.mode == "hybrid"):
            # leg weights are RRF's: a weighted run fuses by RRF whatever the family's settings say
            want, legs = (max(k, rerank_depth), max(leg_n, k, rerank_depth)) if spec.rerank == "cross" else (k, leg_n)
            hits = hybrid.hybrid_search(
                conn, fam, text, cached.embed([text])[0], k=want, per_leg=legs, weights=spec.weights,
                settings=FusionSettings(fusion="rrf") if spec.weights else None,
            )  # fmt: skip
            if spec.rerank == "mmr":
                from ragstore.search.mmr import mmr

                hits = mmr(hits, k, 0.5)
            elif spec.rerank == "cross":
                from ragstore.search.rerank import cross_rerank

                assert reranker is not None
                hits = cross_rerank(hits, text, reranker, k)
        else:
            hits = search(
                conn,
                fam.name,
                text,
                k=k,
                mode=spec.mode,
                rerank=spec.rerank,
                backend=cached,
                reranker=reranker,
                rerank_depth=rerank_depth,
            )
        return [hit.chunk_id for hit in hits]

    results: list[ModeResult] = []
    for spec in modes:
        rankings: dict[str, list[str]] = {}
        latencies: list[float] = []
        if spec.mode == "exact" and spec.rerank is None and not spec.weights:
            # The exact truth for every query in one streamed pass; latency from real per-query calls.
            rankings = _exact_rankings(conn, fam, queries, cached, k)
            for q in queries[:EXACT_LATENCY_SAMPLE]:
                t0 = clock()
                run_one(spec, q.text)
                latencies.append((clock() - t0) * 1000.0)
            report = evaluate(rankings, {qid: qrels.get(qid, {}) for qid in rankings}, k)
            results.append(ModeResult(spec, report, latencies))
            continue
        for q in queries:
            t0 = clock()
            rankings[q.query_id] = run_one(spec, q.text)
            latencies.append((clock() - t0) * 1000.0)
        report = evaluate(rankings, {qid: qrels.get(qid, {}) for qid in rankings}, k)
        results.append(ModeResult(spec, report, latencies))
    return EvalResult(family=fam.name, k=k, queries=len(queries), embed_seconds=embed_seconds, modes=results)


def format_table(result: EvalResult) -> str:
    """A fixed-width table: one row per mode, metrics@k, mean/p95 latency, then deltas against the first mode."""
    head = ["mode", *(f"{m}@{result.k}" for m in METRICS), "mean ms", "p95 ms"]
    rows = [
        [m.spec.label, *(f"{v:.4f}" for v in m.report.as_dict().values()), f"{m.mean_ms:.2f}", f"{m.p95_ms:.2f}"]
        for m in result.modes
    ]
    for i, m in enumerate(result.modes[1:], start=1):
        ratio = m.mean_ms / result.modes[0].mean_ms if result.modes[0].mean_ms else float("nan")
        rows.append([f"Δ {m.spec.label}", *(f"{d:+.4f}" for d in result.deltas(i).values()), f"x{ratio:.2f}", ""])
    widths = [max(len(str(r[c])) for r in [head, *rows]) for c in range(len(head))]
    lines = ["  ".join(str(cell).ljust(widths[c]) for c, cell in enumerate(r)).rstrip() for r in [head, *rows]]
    first = result.modes[0].report
    lines.append(
        f"{result.queries} queries, {first.evaluated} evaluated, {len(first.skipped)} skipped (no relevant chunk); "
        f"queries embedded once in {result.embed_seconds:.1f}s"
    )
    return "\n".join(lines)
