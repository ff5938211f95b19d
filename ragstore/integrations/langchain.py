"""ragstore as a LangChain vector store (extra ``[langchain]``: ``langchain-core``).

``RagstoreVectorStore(embedding, family="docs", dsn=None)`` keeps the documents in ragstore family
``family``, created on first use as an ``external`` family with the embedding model's dimension (probed
once) and name (its ``model`` / ``model_name`` attribute, else its class name), on a pooled
:class:`ragstore.Store` opened on ``dsn`` (or ``store=``, shared with the application); an embedding model of
another name or dimension is refused with :class:`ragstore.errors.ModelMismatch`. A LangChain document id
is the chunk's ``chunk_id`` (a new UUID when the document has none); adding a document whose id exists
replaces it, and adding the same document again changes nothing.

Search: ``similarity_search`` / ``similarity_search_with_score`` (cosine similarity, higher is nearer),
``max_marginal_relevance_search``, ``search_type="hybrid"`` (full text and vectors fused, as ragstore's
hybrid mode) given to the constructor or to one call, and ``filter`` in LangChain's dict syntax (see
:mod:`ragstore.search.metafilter`). The async methods run the sync ones in a worker thread.

:class:`MiniLMEmbeddings` is a LangChain ``Embeddings`` on ragstore's bundled all-MiniLM-L6-v2 (extra
``[minilm]``): a semantic model with no API key and no download.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.runnables.config import run_in_executor
from langchain_core.vectorstores import VectorStore

from ragstore.common.closing import Closing
from ragstore.errors import InvalidInput
from ragstore.integrations._family import FamilyAdapter, FamilyClient, Item, as_matrix, model_name
from ragstore.search.api import hit_cosines
from ragstore.search.request import Hit
from ragstore.store import Store

SEARCH_TYPES = ("similarity", "hybrid")
DEFAULT_FAMILY = "langchain"


class MiniLMEmbeddings(Embeddings):
    """LangChain embeddings on ragstore's ``minilm`` backend (:mod:`ragstore.embed.minilm`): all-MiniLM-L6-v2,
    384 dimensions, unit vectors, the same vectors ``ragstore embed text --backend minilm`` prints.

    ``threads`` and ``batch_size`` are the backend's. The model loads on the first call (BackendError
    naming ``pip install 'ragstore[minilm]'`` when it is not installed); an empty text is InvalidInput, as
    everywhere in ragstore. The async methods run the sync ones in a worker thread.
    """

    def __init__(self, *, threads: int | None = None, batch_size: int | None = None) -> None:
        from ragstore.embed.minilm import BATCH_SIZE, MODEL, MiniLMBackend

        #: The name a ragstore family records for this model.
        self.model = MODEL
        self._backend = MiniLMBackend(threads=threads, batch_size=batch_size or BATCH_SIZE)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order (one backend call for the whole list)."""
        vectors: list[list[float]] = self._backend.embed(list(texts)).tolist()
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return await run_in_executor(None, self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        return await run_in_executor(None, self.embed_query, text)


class RagstoreVectorStore(Closing, FamilyAdapter, VectorStore):
    """A LangChain ``VectorStore`` on one ragstore family (see the module docstring)."""

    def __init__(
        self,
        embedding: Embeddings,
        family: str = DEFAULT_FAMILY,
        dsn: str | None = None,
        *,
        search_type: str = "similarity",
        store: Store | None = None,
        storage: str | None = None,
        rerank_factor: int | None = None,
    ) -> None:
        self._embedding = embedding
        self.search_type = _check_search_type(search_type)
        model = model_name(embedding)
        probe = embedding.embed_query("dimension probe")
        dim = len(probe)
        self._client = FamilyClient(family, dsn, model, dim, store, storage=storage, rerank_factor=rerank_factor)

    # --- the store -----------------------------------------------------------------------------------
    @property
    def embeddings(self) -> Embeddings:
        return self._embedding

    @property
    def family(self) -> str:
        return self._client.name

    def close(self) -> None:
        """Close the connection pool this vector store opened (a ``store=`` passed in stays open)."""
        self._client.close()

    # --- writing ---------------------------------------------------------------------------------------
    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        texts = list(texts)
        if metadatas is not None and len(metadatas) != len(texts):
            raise InvalidInput(f"{len(metadatas)} metadatas for {len(texts)} texts")
        if ids is not None and len(ids) != len(texts):
            raise InvalidInput(f"{len(ids)} ids for {len(texts)} texts")
        given: list[Any] = list(ids) if ids is not None else [None] * len(texts)
        chosen = [str(i) if i else str(uuid.uuid4()) for i in given]
        if not texts:
            return []
        for i, text in enumerate(texts):
            if not isinstance(text, str) or not text.strip():
                raise InvalidInput(f"text #{i} (id {chosen[i]!r}) is empty; ragstore indexes no blank text")
        matrix = as_matrix(self._embedding.embed_documents(texts), len(texts), self._client.dim, self._client.model)
        items = [
            Item(cid, cid, text, dict((metadatas or [{}] * len(texts))[i] or {}), matrix[i].tolist())
            for i, (cid, text) in enumerate(zip(chosen, texts, strict=True))
        ]
        self._client.write(items)
        return chosen

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Delete the documents ``ids`` (ids that do not exist are ignored); all of them when ``ids`` is None."""
        if ids is None:
            self._client.delete_all()
        else:
            self._client.delete_ids([str(i) for i in ids])
        return True

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        return [
            Document(id=cid, page_content=text, metadata=metadata)
            for cid, _package, text, metadata in self._client.get([str(i) for i in ids])
        ]

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        family: str = DEFAULT_FAMILY,
        dsn: str | None = None,
        **kwargs: Any,
    ) -> RagstoreVectorStore:
        store = cls(embedding, family=family, dsn=dsn, **kwargs)
        store.add_texts(texts, metadatas, ids=ids)
        return store

    # --- searching -------------------------------------------------------------------------------------
    def similarity_search(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score(query, k, filter=filter, **kwargs)]

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """The ``k`` nearest documents with their score: cosine similarity (``search_type="similarity"``) or
        the fused score (``"hybrid"``, whose scale depends on the family's fusion); higher is better either
        way. :meth:`similarity_search_with_relevance_scores` gives one measure for both."""
        return [(_document(hit), hit.score) for hit, _ in self._scored(query, k, filter, kwargs)]

    def _similarity_search_with_relevance_scores(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """Relevance in ``[0, 1]`` for both search types: the document's cosine similarity to the query, a
        negative one as 0 (``score_threshold`` compares with it). A hybrid search keeps its fused order."""
        relevance = self._select_relevance_score_fn()
        hits = self._scored(query, k, kwargs.pop("filter", None), kwargs)
        return [(_document(hit), relevance(cosine)) for hit, cosine in hits]

    async def _asimilarity_search_with_relevance_scores(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        return await run_in_executor(None, self._similarity_search_with_relevance_scores, query, k, **kwargs)

    def _scored(
        self, query: str, k: int, filter: dict[str, Any] | None, kwargs: dict[str, Any]
    ) -> list[tuple[Hit, float]]:
        """The hits of the search ``kwargs`` name, each with its cosine similarity to the query."""
        search_type = _check_search_type(kwargs.pop("search_type", self.search_type))
        vector = self._embedding.embed_query(query)
        if search_type == "similarity":
            hits = self._client.search(vector=vector, k=k, metadata=filter, **_options(kwargs))
            return [(hit, hit.score) for hit in hits]
        hits = self._client.search(
            query, mode="hybrid", backend=self._query_backend(vector), k=k, metadata=filter, **_options(kwargs)
        )
        return list(zip(hits, hit_cosines(hits, np.asarray(vector, dtype=np.float32)), strict=True))

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, filter: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        hits = self._client.search(vector=embedding, k=k, metadata=filter, **_options(kwargs))
        return [_document(hit) for hit in hits]

    def max_marginal_relevance_search(
        self,
        query: str,
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        search_type = _check_search_type(kwargs.pop("search_type", self.search_type))
        if search_type == "hybrid":
            hits = self._client.search(
                query,
                mode="hybrid",
                backend=self._query_backend(),
                k=k,
                metadata=filter,
                rerank="mmr",
                fetch_k=fetch_k,
                mmr_lambda=lambda_mult,
                **_options(kwargs),
            )
            return [_document(hit) for hit in hits]
        return self.max_marginal_relevance_search_by_vector(
            self._embedding.embed_query(query), k, fetch_k, lambda_mult, filter=filter, **kwargs
        )

    def max_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        hits = self._client.search(
            vector=embedding,
            k=k,
            metadata=filter,
            rerank="mmr",
            fetch_k=max(fetch_k, k),
            mmr_lambda=lambda_mult,
            **_options(kwargs),
        )
        return [_document(hit) for hit in hits]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        # A cosine similarity (1 is the same direction) as a relevance: 0 and below is unrelated.
        return lambda score: max(0.0, min(1.0, score))

    def _query_backend(self, vector: list[float] | None = None) -> Any:
        """The backend a text query of a hybrid search is embedded with: the application's model, or the
        ``vector`` it already made for this query."""
        from ragstore.integrations._family import CallableBackend

        def embed(texts: list[str]) -> list[list[float]]:
            return [vector if vector is not None else self._embedding.embed_query(text) for text in texts]

        return CallableBackend(self._client.model, self._client.dim, embed)


def _check_search_type(value: Any) -> str:
    if value not in SEARCH_TYPES:
        raise InvalidInput(f"unknown search_type {value!r}: use one of {', '.join(SEARCH_TYPES)}")
    return str(value)


# Options of ragstore's search a LangChain call may pass through (others LangChain passes are ignored).
_PASSED = ("min_score", "ef_search", "package")


def _options(kwargs: dict[str, Any]) -> dict[str, Any]:
    if "score_threshold" in kwargs and "min_score" not in kwargs:
        kwargs = {**kwargs, "min_score": kwargs["score_threshold"]}
    return {key: kwargs[key] for key in _PASSED if kwargs.get(key) is not None}


def _document(hit: Hit) -> Document:
    return Document(id=hit.chunk_id, page_content=hit.text, metadata=dict(hit.metadata))
