"""search(rerank="cross") and search(hyde=...) on a real family, against the local rerank/chat stub."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ragstore import families
from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import InvalidInput
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from ragstore.search import api
from ragstore.search.hyde import Hyde
from ragstore.search.rerank import HttpReranker
from tests.openai_stub import Reply
from tests.rerank_stub import RerankStub

TEXTS = [
    "copy files and directories",
    "copy files quickly",
    "move files",
    "remove directories",
    "list files",
    "archive files into a tarball",
]


@pytest.fixture
def docs(conn, tmp_path):
    families.create_family(conn, "docs", OfflineBackend())
    src = tmp_path / "c.jsonl"
    src.write_text(
        "".join(json.dumps({"chunk_id": f"c{i}", "package_path": "p", "text": t}) + "\n" for i, t in enumerate(TEXTS))
    )
    index_sources(conn, "docs", open_sources([str(src)]))
    return families.get_family(conn, "docs")


@pytest.fixture
def stub():
    # The "cross-encoder" likes short documents best: an order no first stage here produces.
    with RerankStub(scorer=lambda q, d: 100.0 - len(d)) as server:
        yield server


def reranker(stub):
    return HttpReranker(stub.rerank_url, "rr", sleep=lambda s: None)


def hyde(stub, **kw):
    return Hyde(stub.chat_url, "chat", api_key_env=None, sleep=lambda s: None, **kw)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["hnsw", "exact", "fts", "hybrid"])
def test_cross_rerank_reorders_and_keeps_first_stage_scores(conn, docs, stub, mode):
    plain = api.search(conn, "docs", "copy files", k=6, mode=mode)
    hits = api.search(conn, "docs", "copy files", k=3, mode=mode, rerank="cross", reranker=reranker(stub))
    sent = stub.requests[-1].body
    assert sent["query"] == "copy files"
    assert sent["documents"] == [h.text for h in plain]  # every first-stage hit, in first-stage order
    by_length = sorted(plain, key=lambda h: (len(h.text), plain.index(h)))[:3]
    assert [h.chunk_id for h in hits] == [h.chunk_id for h in by_length]
    first = {h.chunk_id: (i + 1, h.score) for i, h in enumerate(plain)}
    for hit in hits:
        assert (hit.first_rank, hit.score) == pytest.approx(first[hit.chunk_id])
        assert hit.rerank_score == pytest.approx(100.0 - len(hit.text))


def test_rerank_depth_bounds_what_the_reranker_reads(conn, docs, stub):
    api.search(conn, "docs", "copy files", k=2, mode="hnsw", rerank="cross", reranker=reranker(stub), rerank_depth=4)
    assert len(stub.requests[-1].body["documents"]) == 4
    # k above the depth: the reranker reads k candidates
    hits = api.search(
        conn, "docs", "copy files", k=5, mode="hnsw", rerank="cross", reranker=reranker(stub), rerank_depth=2
    )
    assert len(stub.requests[-1].body["documents"]) == 5 and len(hits) == 5


def test_min_score_filters_the_first_stage_before_the_reranker(conn, docs, stub):
    plain = api.search(conn, "docs", "copy files", k=6, mode="hnsw")
    floor = plain[2].score
    api.search(conn, "docs", "copy files", k=6, mode="hnsw", min_score=floor, rerank="cross", reranker=reranker(stub))
    assert len(stub.requests[-1].body["documents"]) == sum(h.score >= floor for h in plain)


def test_cross_rerank_refusals(conn, docs, stub):
    with pytest.raises(InvalidInput, match="needs a reranker"):
        api.search(conn, "docs", "copy files", rerank="cross")
    with pytest.raises(InvalidInput, match="needs a query text"):
        api.search(conn, "docs", vector=[0.1] * docs.dim, rerank="cross", reranker=reranker(stub))
    with pytest.raises(InvalidInput, match="rerank_depth must be at most 1000"):
        api.search(conn, "docs", "copy files", rerank="cross", reranker=reranker(stub), rerank_depth=1001)
    assert stub.requests == []


@pytest.mark.slow
def test_hyde_replace_searches_with_the_hypothetical_answer(conn, docs, stub):
    stub.answers["how do I get rid of a folder"] = "remove directories"
    h = hyde(stub, mode="replace")
    hits = api.search(conn, "docs", "how do I get rid of a folder", k=1, mode="hnsw", hyde=h)
    assert hits[0].chunk_id == "c3" and hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert h.last is not None and h.last.used and not h.last.cached and h.last.answer == "remove directories"


def test_hyde_average_lies_between_query_and_answer(conn, docs, stub):
    stub.answers["copy files"] = "remove directories"
    backend = OfflineBackend()
    q, a = backend.embed(["copy files", "remove directories"])
    expected = (q / np.linalg.norm(q) + a / np.linalg.norm(a)) / 2
    hits = api.search(conn, "docs", "copy files", k=6, mode="exact", hyde=hyde(stub))
    want = api.search(conn, "docs", vector=expected, k=6, mode="exact")
    assert [x.chunk_id for x in hits] == [x.chunk_id for x in want]


def test_hyde_answers_are_cached_by_endpoint_model_and_prompt(conn, docs, stub):
    stub.answers["get rid of a folder"] = "remove directories"
    first = api.search(conn, "docs", "get rid of a folder", k=3, mode="hnsw", hyde=hyde(stub, mode="replace"))
    assert len(stub.requests) == 1
    h = hyde(stub, mode="replace")
    again = api.search(conn, "docs", "get rid of a folder", k=3, mode="hnsw", hyde=h)
    assert len(stub.requests) == 1  # neither the chat model nor the embedding model asked again
    assert h.last is not None and h.last.used and h.last.cached and h.last.answer is None
    assert [x.chunk_id for x in again] == [x.chunk_id for x in first]
    # another prompt (or model, or endpoint) is another entry
    api.search(conn, "docs", "get rid of a folder", k=3, mode="hnsw", hyde=hyde(stub, prompt="Answer briefly."))
    assert len(stub.requests) == 2
    keys = [r[0] for r in conn.execute("SELECT model FROM ragstore.embedding_cache WHERE model LIKE 'hyde:%'")]
    assert len(set(keys)) == 1 and keys[0].startswith("hyde:chat@http://127.0.0.1:") and ">offline:" in keys[0]
    assert conn.execute("SELECT count(*) FROM ragstore.embedding_cache WHERE model LIKE 'hyde:%'").fetchone() == (2,)


def test_hyde_in_hybrid_keeps_the_query_text_for_full_text(conn, docs, stub):
    stub.answers["copy files"] = "remove directories"
    plain = api.search(conn, "docs", "copy files", k=6, mode="hybrid")
    with_hyde = api.search(conn, "docs", "copy files", k=6, mode="hybrid", hyde=hyde(stub, mode="replace"))
    fts = {h.chunk_id: h.ranks.get("fts") for h in plain}
    assert {h.chunk_id: h.ranks.get("fts") for h in with_hyde} == fts
    assert [h.ranks.get("vector") for h in with_hyde] != [h.ranks.get("vector") for h in plain]


def test_hyde_refused_falls_back_to_the_plain_query(conn, docs, stub):
    stub.queue(Reply(edit=lambda d: {**d, "choices": [{"message": {"content": "", "refusal": "no"}}]}))
    h = hyde(stub)
    hits = api.search(conn, "docs", "copy files", k=4, mode="hnsw", hyde=h)
    assert [x.chunk_id for x in hits] == [x.chunk_id for x in api.search(conn, "docs", "copy files", k=4, mode="hnsw")]
    assert h.last is not None and not h.last.used and "refused" in (h.last.note or "")
    assert conn.execute("SELECT count(*) FROM ragstore.embedding_cache WHERE model LIKE 'hyde:%'").fetchone() == (0,)


def test_hyde_needs_a_vector_leg(conn, docs, stub):
    with pytest.raises(InvalidInput, match="full text has none"):
        api.search(conn, "docs", "copy files", mode="fts", hyde=hyde(stub))
    with pytest.raises(InvalidInput, match="offline vectors carry no meaning"):
        api.search(conn, "docs", "copy files", hyde=hyde(stub))  # auto is full text on the offline fingerprint
    with pytest.raises(InvalidInput, match="needs a query text"):
        api.search(conn, "docs", vector=[0.1] * docs.dim, hyde=hyde(stub))
    assert stub.requests == []


def test_hyde_inside_a_caller_transaction_leaves_it_usable(dsn, docs, stub):
    stub.answers["copy files"] = "move files"
    with connect(dsn) as tx:  # not autocommit: the cache write is a savepoint in the open transaction
        api.search(tx, "docs", "copy files", k=2, mode="hnsw", hyde=hyde(stub))
        assert tx.execute("SELECT 1").fetchone() == (1,)
        tx.commit()
    with connect(dsn) as other:
        assert other.execute("SELECT count(*) FROM ragstore.embedding_cache WHERE model LIKE 'hyde:%'").fetchone() == (
            1,
        )
