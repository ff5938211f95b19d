"""Helpers several test modules share (once in integrations/test_llamaindex_ingestion.py)."""

import hashlib
import re

import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.node_parser import SentenceSplitter

from ragstore.integrations.llamaindex import RagstoreVectorStore

DIM = 32


TOPICS = ["apples", "bridges", "comets", "dolphins", "engines", "forests", "glaciers", "harbours"]


class WordHashEmbedding(BaseEmbedding):
    """A deterministic bag-of-words model: each word adds 1 to one of DIM buckets (a stable hash)."""

    model_name: str = "word-hash-32"

    @classmethod
    def class_name(cls) -> str:
        return "WordHashEmbedding"

    def _vec(self, text: str) -> list[float]:
        out = [0.0] * DIM
        for word in re.findall(r"[a-z]+", text.lower()):
            out[int(hashlib.sha256(word.encode()).hexdigest(), 16) % DIM] += 1.0
        out[0] += 0.01  # never the zero vector
        return out

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vec(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vec(text)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vec(query)


def documents(edit: str | None = None) -> list[Document]:
    """Eight documents with stable ids, each long enough for the splitter to cut it into several nodes."""
    docs = []
    for topic in TOPICS:
        sentences = [f"Sentence {i} of the notes on {topic} says {topic} matter for reason {i}." for i in range(40)]
        if topic == edit:
            sentences[3] = f"An edited sentence on {topic} replaces the old one."
        docs.append(Document(text=" ".join(sentences), id_=f"doc-{topic}", metadata={"topic": topic}))
    return docs


SPLITTER = SentenceSplitter(chunk_size=64, chunk_overlap=0)


@pytest.fixture
def embed():
    return WordHashEmbedding()


@pytest.fixture
def store(dsn, embed):
    vector_store = RagstoreVectorStore("li", dsn, embed_model=embed)
    yield vector_store
    vector_store.close()


def from_documents(store, embed, docs, **kwargs):
    return VectorStoreIndex.from_documents(
        docs,
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=embed,
        transformations=[SPLITTER],
        **kwargs,
    )


def rows_by_document(store):
    with store._client.store.connection() as conn:
        found = conn.execute(
            "SELECT package_path, count(*) FROM ragstore.chunks WHERE family = %s GROUP BY 1", (store.family,)
        )
        return dict(found.fetchall())


def nodes_per_document(docs):
    return {doc.id_: len(SPLITTER.get_nodes_from_documents([doc])) for doc in docs}
