"""Recall by meaning: an agent's most relevant memory records for a query.

Composition answers "what happened lately"; recall answers "what do I know about this", whatever its
age. Records are embedded into ``ragstore.memory_embeddings`` — a family of their own, one row per
record and model, in an unconstrained ``vector`` column so every backend shares the table — lazily:
each call embeds at most ``embed_limit`` (<= 500) records that have no embedding for the backend yet,
newest first, and says how many remain. Ranking is exact over the agent's declared stores: Postgres
computes the cosine (pgvector ``<=>``) and the lexical score (``ts_rank_cd`` of the record's English
tsvector against an OR of the query's lexemes), keeps the best ``pool`` of each leg, and
:func:`ragstore.search.blend.blend` orders them (semantic 0.55, lexical 0.30, temporal 0.15: the absolute
decay of ``at`` relative to the query's ``now``, half-life 30 days, never rescaled across the candidates).
The semantic signal is absolute too: the cosine itself above :data:`RECALL_COSINE_FLOOR` (0: a negative
cosine counts as none), not rescaled across the candidates and not floored at the hybrid blend's 0.25. A
sentence model's cosine between a question and the record that answers it in other words is often under
0.25, and a floor above every candidate left the semantic signal flat; rescaled, a weak best match
among unrelated records (and any noise of a non-semantic backend) would count as a perfect one. A
record not embedded yet can still come in on the lexical leg.

The binding is respected: only the profile's declared stores are read, inside :func:`agent_scope`
(row-level security) with the agent in every WHERE clause.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ragstore.common.fields import fields_dict
from ragstore.common.moments import check_aware
from ragstore.db.connection import Conn
from ragstore.db.sqlfiles import query as sql_block
from ragstore.embed.base import Backend
from ragstore.errors import InvalidInput
from ragstore.memory.bundle import record_to_dict
from ragstore.memory.models import ALL_STORES, AgentProfile, MemoryRecord, Store
from ragstore.memory.store import agent_scope
from ragstore.search.blend import (
    DEFAULT_HALF_LIFE_DAYS,
    DEFAULT_WEIGHTS,
    Candidate,
    blend,
)

__all__ = [
    "MAX_EMBED_BATCH",
    "RECALL_COSINE_FLOOR",
    "RecallHit",
    "RecallResult",
    "embed_pending",
    "model_key",
    "recall",
]

#: The most records one call embeds: recall latency stays bounded however much was added since.
MAX_EMBED_BATCH = 500
_DEFAULT_POOL = 200
#: Recall's cosine floor (see the module docstring): cosines at or below it add no semantic signal.
RECALL_COSINE_FLOOR = 0.0


@dataclass(frozen=True, slots=True)
class RecallHit:
    """A recalled record with its blended ``score`` and normalised signals; ``cosine`` is ``None`` when
    the record has no embedding yet."""

    record: MemoryRecord
    score: float
    cosine: float | None
    semantic: float
    lexical: float
    temporal: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (scores rounded to 6 places so the text is stable)."""
        return {
            "record": record_to_dict(self.record),
            "score": round(self.score, 6),
            "cosine": None if self.cosine is None else round(self.cosine, 6),
            "semantic": round(self.semantic, 6),
            "lexical": round(self.lexical, 6),
            "temporal": round(self.temporal, 6),
        }


@dataclass(frozen=True, slots=True)
class RecallResult:
    """The hits, best first (score descending, id ascending), and what the lazy embedding did."""

    agent: str
    query: str
    model: str
    hits: tuple[RecallHit, ...]
    embedded: int
    pending: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return fields_dict(self, hits=[hit.to_dict() for hit in self.hits])


def model_key(backend: Backend) -> str:
    """The ``model`` column of an embedding: ``name/model/dim``, so two spaces never share rows."""
    return f"{backend.name}/{backend.model}/{backend.dim}"


def _declared(profile: AgentProfile) -> list[str]:
    return [store.value for store in ALL_STORES if store in profile.stores]


def embed_pending(
    conn: Conn, profile: AgentProfile, backend: Backend, *, limit: int = MAX_EMBED_BATCH
) -> tuple[int, bool]:
    """Embed up to ``limit`` not-yet-embedded records of the declared stores, newest first.

    Returns ``(embedded, more_pending)``. Raises :class:`~ragstore.errors.InvalidInput` when ``limit``
    is outside ``0..MAX_EMBED_BATCH``, the backend's errors (``BackendError``) and mapped database errors.
    """
    if not 0 <= limit <= MAX_EMBED_BATCH:
        raise InvalidInput(f"embed limit must be between 0 and {MAX_EMBED_BATCH}, got {limit}")
    with agent_scope(conn, profile.agent):
        return _embed_pending(conn, profile, backend, limit)


def _embed_pending(conn: Conn, profile: AgentProfile, backend: Backend, limit: int) -> tuple[int, bool]:
    if limit == 0:
        return 0, False
    params = {"agent": profile.agent, "stores": _declared(profile), "model": model_key(backend), "limit": limit + 1}
    rows = conn.execute(sql_block("memory", "pending_embeddings"), params).fetchall()
    batch = rows[:limit]
    if not batch:
        return 0, False
    vectors = backend.embed([str(row[1]) for row in batch])
    if vectors.shape != (len(batch), backend.dim):
        raise InvalidInput(
            f"backend {backend.name} returned shape {vectors.shape}, expected ({len(batch)}, {backend.dim})"
        )
    with conn.cursor() as cur:
        cur.executemany(
            sql_block("memory", "insert_embedding"),
            [
                {"agent": profile.agent, "id": row[0], "model": params["model"], "dim": backend.dim, "embedding": vec}
                for row, vec in zip(batch, vectors, strict=True)
            ],
        )
    return len(batch), len(rows) > limit


def recall(
    conn: Conn,
    profile: AgentProfile,
    query: str,
    k: int = 8,
    *,
    now: datetime,
    backend: Backend | None = None,
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
    weights: tuple[float, float, float] = DEFAULT_WEIGHTS,
    cosine_floor: float = RECALL_COSINE_FLOOR,
    pool: int = _DEFAULT_POOL,
    embed_limit: int = MAX_EMBED_BATCH,
) -> RecallResult:
    """The ``k`` records of ``profile``'s declared stores most relevant to ``query``, as of ``now``.

    Embeds pending records first (:func:`embed_pending`, at most ``embed_limit``), then ranks as the
    module docstring says. Records with ``at > now`` are ignored. ``backend`` defaults to the offline
    fingerprint (hermetic, not semantic); pass ``ragstore.families.make_backend("minilm")`` for recall by meaning.
    Raises :class:`~ragstore.errors.InvalidInput` for a blank query, ``k`` or ``pool`` < 1, an
    ``embed_limit`` outside ``0..500``, a naive ``now`` or bad blend settings; ``BackendError`` from
    the backend; mapped database errors. Commits the new embeddings when it opened the transaction.
    A role without INSERT on ``ragstore.memory_embeddings`` (the reader) embeds nothing and ranks with
    the embeddings already stored; ``pending`` then says whether records are still unembedded.
    """
    if not query.strip():
        raise InvalidInput("recall needs a non-blank query")
    if k < 1 or pool < 1:
        raise InvalidInput(f"k and pool must be at least 1, got k={k}, pool={pool}")
    if not 0 <= embed_limit <= MAX_EMBED_BATCH:
        raise InvalidInput(f"embed limit must be between 0 and {MAX_EMBED_BATCH}, got {embed_limit}")
    check_aware("recall: now", now)
    if backend is None:
        from ragstore.embed.offline import OfflineBackend

        backend = OfflineBackend()
    query_vector = backend.embed([query.strip()])[0]
    with agent_scope(conn, profile.agent):
        # A read-only role (the reader) cannot store embeddings: it recalls with those already stored
        # (and the lexical leg), and the records left unembedded are reported as pending.
        row = conn.execute(sql_block("memory", "may_store_embeddings")).fetchone()
        may_store = bool(row and row[0])
        embedded, pending = _embed_pending(conn, profile, backend, embed_limit if may_store else 0)
        if not may_store:
            pending = bool(
                conn.execute(
                    sql_block("memory", "pending_embeddings"),
                    {"agent": profile.agent, "stores": _declared(profile), "model": model_key(backend), "limit": 1},
                ).fetchone()
            )
        rows = conn.execute(
            sql_block("memory", "recall_candidates"),
            {
                "agent": profile.agent,
                "stores": _declared(profile),
                "model": model_key(backend),
                "embedding": query_vector,
                "query": query,
                "now": now,
                "pool": pool,
            },
        ).fetchall()
    hits = _rank(profile, rows, k, now, weights, half_life_days, cosine_floor)
    return RecallResult(
        agent=profile.agent, query=query, model=model_key(backend), hits=hits, embedded=embedded, pending=pending
    )


def _rank(
    profile: AgentProfile,
    rows: Sequence[Sequence[Any]],
    k: int,
    now: datetime,
    weights: tuple[float, float, float],
    half_life_days: float,
    cosine_floor: float,
) -> tuple[RecallHit, ...]:
    records: dict[str, tuple[MemoryRecord, float | None]] = {}
    candidates: list[Candidate] = []
    for id_, store, at, content, salience, confidence, tags, metadata, cosine, lexical in rows:
        if Store(store) not in profile.stores:  # the SQL filters already; a binding is never trusted to SQL alone
            continue
        record = MemoryRecord(
            id=id_, agent=profile.agent, store=Store(store), at=at, content=content,
            salience=salience, confidence=confidence, tags=tuple(tags), metadata=metadata,
        )  # fmt: skip
        cos = float(cosine) if cosine is not None and math.isfinite(cosine) else None
        records[id_] = (record, cos)
        candidates.append(
            Candidate(chunk_id=id_, cosine=cos if cos is not None else 0.0, lexical=float(lexical), timestamp=at)
        )
    ranked = blend(
        candidates, weights, now=now, half_life_days=half_life_days, cosine_floor=cosine_floor, absolute_semantic=True
    )
    return tuple(
        RecallHit(
            record=records[b.chunk_id][0],
            score=b.score,
            cosine=records[b.chunk_id][1],
            semantic=b.semantic,
            lexical=b.lexical,
            temporal=b.temporal,
        )
        for b in ranked[:k]
    )
