"""The LangChain adapter: LangChain's own vector-store suite, unmodified, then what ragstore adds."""

from collections.abc import Iterator

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langchain_tests")

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_tests.integration_tests import VectorStoreIntegrationTests

from ragstore.errors import InvalidInput, ModelMismatch, NotFound
from ragstore.families import get_family
from ragstore.integrations.langchain import RagstoreVectorStore


class TestStandardSuite(VectorStoreIntegrationTests):
    """LangChain's standard tests, sync and async, as published: each test gets a fresh family."""

    @pytest.fixture
    def vectorstore(self, dsn: str) -> Iterator[RagstoreVectorStore]:
        store = RagstoreVectorStore(self.get_embeddings(), family="standard", dsn=dsn)
        try:
            yield store
        finally:
            store.drop()
            store.close()


@pytest.fixture
def store(dsn):
    with RagstoreVectorStore(DeterministicFakeEmbedding(size=8), family="docs", dsn=dsn) as s:
        yield s


def docs(n=30):
    return [
        Document(
            page_content=f"document {i} about {['cats', 'dogs', 'birds'][i % 3]}",
            metadata={"n": i, "kind": ["a", "b", "c"][i % 3]},
        )
        for i in range(n)
    ]


def test_family_records_the_model_and_refuses_another(dsn, store):
    fam = store._client.run(lambda conn: get_family(conn, "docs"))
    assert (fam.backend, fam.model, fam.dim) == ("external", "DeterministicFakeEmbedding", 8)
    with pytest.raises(ModelMismatch):
        RagstoreVectorStore(DeterministicFakeEmbedding(size=9), family="docs", dsn=dsn)

    class Named(DeterministicFakeEmbedding):
        model: str = "text-embedding-3-small"

    with pytest.raises(ModelMismatch):
        RagstoreVectorStore(Named(size=8), family="docs", dsn=dsn)


def test_drop_removes_the_family(dsn, store):
    store.add_documents(docs(3))
    store.drop()
    with pytest.raises(NotFound):
        store._client.run(lambda conn: get_family(conn, "docs"))


@pytest.mark.parametrize(
    ("flt", "want"),
    [
        ({"kind": "a"}, lambda n: n % 3 == 0),
        ({"kind": {"$ne": "a"}}, lambda n: n % 3 != 0),
        ({"n": {"$gte": 25}}, lambda n: n >= 25),
        ({"n": {"$lt": 3}}, lambda n: n < 3),
        ({"kind": {"$in": ["b", "c"]}, "n": {"$lte": 10}}, lambda n: n % 3 != 0 and n <= 10),
        ({"kind": {"$nin": ["b", "c"]}}, lambda n: n % 3 == 0),
        ({"$or": [{"n": {"$eq": 1}}, {"n": {"$gt": 28}}]}, lambda n: n in (1, 29)),
        ({"$and": [{"kind": "b"}, {"n": {"$gt": 20}}]}, lambda n: n % 3 == 1 and n > 20),
    ],
)
def test_metadata_filters_keep_exactly_the_matching_documents(store, flt, want):
    store.add_documents(docs())
    found = store.similarity_search("document", k=30, filter=flt)
    assert sorted(d.metadata["n"] for d in found) == [n for n in range(30) if want(n)]


def test_unsupported_filter_is_refused(store):
    store.add_documents(docs(3))
    with pytest.raises(InvalidInput, match=r"\$regex"):
        store.similarity_search("x", filter={"kind": {"$regex": "a.*"}})


def test_scores_ids_get_and_delete(store):
    ids = store.add_documents(docs(10), ids=[f"id{i}" for i in range(10)])
    assert ids == [f"id{i}" for i in range(10)]
    scored = store.similarity_search_with_score("document 4 about dogs", k=3)
    assert scored[0][0].id == "id4" and scored[0][1] == pytest.approx(1.0, abs=1e-5)
    assert [s for _, s in scored] == sorted((s for _, s in scored), reverse=True)
    assert [d.id for d in store.get_by_ids(["id2", "nope", "id1"])] == ["id1", "id2"]
    store.delete(["id1", "id2"])
    assert store.get_by_ids(["id1", "id2"]) == []
    assert store._client.count() == 8
    store.delete()
    assert store._client.count() == 0


def test_mmr_returns_diverse_documents(store):
    store.add_texts(["same text"] * 1 + ["same text!"] + ["other words"], ids=["a", "b", "c"])
    plain = store.similarity_search_by_vector(store.embeddings.embed_query("same text"), k=2)
    assert plain[0].id == "a"
    diverse = store.max_marginal_relevance_search("same text", k=2, fetch_k=3, lambda_mult=0.0)
    assert len(diverse) == 2 and diverse[0].id == "a"
    relevant = store.max_marginal_relevance_search("same text", k=2, fetch_k=3, lambda_mult=1.0)
    assert [d.id for d in relevant] == [d.id for d in plain]


def test_hybrid_search_type_finds_words(store):
    store.add_documents(docs())
    hits = store.similarity_search("birds", k=5, search_type="hybrid")
    # The fake embedding is noise, so the fused ranking mixes in documents the vector leg liked; the full-text
    # leg must still bring the word's documents in (a vector search alone has no reason to).
    assert len(hits) == 5 and any("birds" in d.page_content for d in hits)
    with pytest.raises(InvalidInput, match="search_type"):
        store.similarity_search("birds", search_type="nearest")


def test_as_retriever_with_filter_and_mmr(store):
    store.add_documents(docs())
    retriever = store.as_retriever(search_kwargs={"k": 4, "filter": {"kind": "c"}})
    found = retriever.invoke("document")
    assert len(found) == 4 and all(d.metadata["kind"] == "c" for d in found)
    mmr = store.as_retriever(search_type="mmr", search_kwargs={"k": 3, "fetch_k": 10})
    assert len(mmr.invoke("document")) == 3
    hybrid = store.as_retriever(search_kwargs={"k": 3, "search_type": "hybrid"})
    assert all("dogs" in d.page_content for d in hybrid.invoke("dogs"))


def test_blank_text_is_refused_and_nothing_written(store):
    with pytest.raises(InvalidInput, match="empty"):
        store.add_texts(["fine", "  "])
    assert store._client.count() == 0


async def test_async_search_and_filters(store):
    await store.aadd_documents(docs())
    found = await store.asimilarity_search("document", k=30, filter={"n": {"$lt": 4}})
    assert sorted(d.metadata["n"] for d in found) == [0, 1, 2, 3]
    mmr = await store.amax_marginal_relevance_search("document", k=3)
    assert len(mmr) == 3


def _cosine(a, b):
    import numpy as np

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("search_type", ["similarity", "hybrid"])
def test_relevance_scores_are_the_cosine_to_the_query_in_both_search_types(store, search_type):
    # A relevance score is the document's cosine similarity to the query, below 0 as 0: in hybrid too,
    # where the fused score (RRF: below 0.04) has no fixed scale and would say nothing clamped to [0, 1].
    texts = [d.page_content for d in docs(12)]
    store.add_texts(texts, ids=[f"id{i}" for i in range(12)])
    query = "document 4 about birds"
    q = store.embeddings.embed_query(query)
    got = store.similarity_search_with_relevance_scores(query, k=5, search_type=search_type)
    assert len(got) == 5
    for doc, relevance in got:
        assert relevance == pytest.approx(
            max(0.0, _cosine(store.embeddings.embed_query(doc.page_content), q)), abs=1e-5
        )
    kept = store.similarity_search_with_relevance_scores(query, k=5, search_type=search_type, score_threshold=0.5)
    assert all(relevance >= 0.5 for _, relevance in kept)


def test_the_store_creates_its_family_in_the_storage_asked_for_and_searches_it(dsn):
    from ragstore import families
    from ragstore.db.connection import connect

    with RagstoreVectorStore(
        DeterministicFakeEmbedding(size=8), family="quantized", dsn=dsn, storage="bit", rerank_factor=6
    ) as s:
        s.add_texts(["copy files", "move files", "list directories"], ids=["a", "b", "c"])
        assert [d.page_content for d in s.similarity_search("move files", k=1)] == ["move files"]
    with connect(dsn) as conn:
        family = families.get_family(conn, "quantized")
    assert (family.storage, family.rerank_factor) == ("bit", 6)
