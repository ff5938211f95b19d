"""mode="auto" and MMR after full-text and hybrid searches."""

import json

import numpy as np
import pytest

from ragstore import families
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import InvalidInput
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from ragstore.search import api

pytestmark = pytest.mark.usefixtures("each_storage")  # each test once per index storage


@pytest.fixture
def docs(conn, tmp_path):
    families.create_family(conn, "docs", OfflineBackend())
    texts = ["copy files and directories", "copy files quickly", "move files", "remove directories", "list files"]
    src = tmp_path / "c.jsonl"
    src.write_text(
        "".join(json.dumps({"chunk_id": f"c{i}", "package_path": "p", "text": t}) + "\n" for i, t in enumerate(texts))
    )
    index_sources(conn, "docs", open_sources([str(src)]))
    return families.get_family(conn, "docs")


def test_auto_is_full_text_for_the_offline_fingerprint(conn, docs):
    assert api.default_mode(docs, "copy files") == "fts"
    assert api.default_mode(docs, None) == "hnsw"
    auto = api.search(conn, "docs", "copy files", k=3)
    assert [h.chunk_id for h in auto] == [h.chunk_id for h in api.search(conn, "docs", "copy files", k=3, mode="fts")]


def test_auto_is_hybrid_for_a_semantic_family(docs):
    from dataclasses import replace

    assert api.default_mode(replace(docs, backend="minilm"), "copy files") == "hybrid"


def test_mmr_after_hybrid_uses_cosine_relevance(conn, docs):
    # The offline family refuses MMR for a text query it embeds itself; a caller's own backend is its call.
    with pytest.raises(InvalidInput, match="fingerprints"):
        api.search(conn, "docs", "copy files", k=3, mode="hybrid", rerank="mmr")
    hits = api.search(
        conn, "docs", "copy files", k=3, mode="hybrid", rerank="mmr", mmr_lambda=1.0, backend=OfflineBackend()
    )
    query = OfflineBackend().embed(["copy files"])[0]
    cosines = []
    for hit in hits:
        v = hit.vector
        cosines.append(float(v @ query / (np.linalg.norm(v) * np.linalg.norm(query))))
    # λ = 1 is pure relevance: the picks come in descending cosine to the query, and the scores are those cosines.
    assert [h.score for h in hits] == pytest.approx(cosines, abs=1e-6)
    assert cosines == sorted(cosines, reverse=True)
