"""ragstore as a LlamaIndex vector store (extra ``[llamaindex]``: ``llama-index-core``).

``RagstoreVectorStore(family="docs", dsn=None, embed_model=…)`` (or ``embed_dim=`` and ``model_name=``
instead of a model) keeps nodes in ragstore family ``family``, created on first use as an ``external``
family of that dimension and model name; a model of another name or dimension is refused with
:class:`ragstore.errors.ModelMismatch`. A node is the chunk ``node_id``; its document (``ref_doc_id``) is
the chunk's ``package_path``, so ``delete(ref_doc_id)`` removes all of a document's nodes. Adding a node
whose id exists replaces it; adding the same nodes again changes nothing (no duplicate rows).

LlamaIndex's splitter gives a document's nodes new ids on every run, so ``add`` also removes, once its
nodes are written, the copies earlier adds left of them: a stored node of the same document that is the
same node under another id (same text, offsets and metadata, split from the same version of the
document), or that was split from another version of it (the node records name the document's hash).
Re-running ``VectorStoreIndex.from_documents`` or an ``IngestionPipeline`` over the same documents thus
leaves one row per node, and over an edited document only its new nodes, however LlamaIndex batches the
adds. Nodes of no document, nodes whose record names no source hash and other documents' nodes stay.

``query`` takes ``MetadataFilters`` (EQ, NE, GT, GTE, LT, LTE, IN, NIN, CONTAINS, ANY, ALL, nested, AND
and OR; anything else is refused with InvalidInput) and the modes ``default`` (vectors), ``hybrid``
(full text and vectors fused), ``text_search``/``sparse`` (full text) and ``mmr``. A filtered query
returns ``similarity_top_k`` nodes whenever that many match. ``aadd``/``async_add``, ``aquery`` and
``adelete`` run the same calls in a worker thread.

:class:`MiniLMEmbedding` is a LlamaIndex ``BaseEmbedding`` on ragstore's bundled all-MiniLM-L6-v2 (extra
``[minilm]``): a semantic model with no API key and no download.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict

from ragstore.common.jsonvalue import json_metadata
from ragstore.errors import InvalidInput
from ragstore.integrations._family import CallableBackend, FamilyAdapter, FamilyClient, Item, as_matrix, model_name
from ragstore.store import Store

DEFAULT_FAMILY = "llamaindex"
_COMPARE = {
    FilterOperator.EQ: "$eq",
    FilterOperator.NE: "$ne",
    FilterOperator.GT: "$gt",
    FilterOperator.GTE: "$gte",
    FilterOperator.LT: "$lt",
    FilterOperator.LTE: "$lte",
    FilterOperator.IN: "$in",
    FilterOperator.NIN: "$nin",
}


class MiniLMEmbedding(BaseEmbedding):
    """LlamaIndex embeddings on ragstore's ``minilm`` backend (:mod:`ragstore.embed.minilm`): all-MiniLM-L6-v2,
    384 dimensions, unit vectors, the same vectors ``ragstore embed text --backend minilm`` prints.

    ``threads`` is the backend's; LlamaIndex hands ``embed_batch_size`` texts to one call. The model loads
    on the first call (BackendError naming ``pip install 'ragstore[minilm]'`` when it is not installed);
    an empty text is InvalidInput, as everywhere in ragstore. The async methods run in a worker thread.
    """

    model_name: str = Field(default="all-MiniLM-L6-v2", description="The model (a family records this name).")
    embed_batch_size: int = Field(default=128, gt=0, le=2048, description="Texts per backend call.")
    threads: int | None = Field(default=None, description="ONNX sessions run side by side (default: CPUs, at most 4).")
    _backend: Any = PrivateAttr()

    def __init__(self, **kwargs: Any) -> None:
        from ragstore.embed.minilm import MODEL, MiniLMBackend

        super().__init__(**kwargs)
        if self.model_name != MODEL:
            raise InvalidInput(f"MiniLMEmbedding runs {MODEL}; model_name {self.model_name!r} would misname it")
        self._backend = MiniLMBackend(threads=self.threads)

    @classmethod
    def class_name(cls) -> str:
        return "MiniLMEmbedding"

    def _embed(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = self._backend.embed(texts).tolist()
        return vectors

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._embed([query])[0]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._embed([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embed(list(texts))

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)


class RagstoreVectorStore(FamilyAdapter, BasePydanticVectorStore):
    """A LlamaIndex vector store on one ragstore family (see the module docstring)."""

    stores_text: bool = True
    flat_metadata: bool = False
    family: str = DEFAULT_FAMILY
    _client: FamilyClient = PrivateAttr()

    def __init__(
        self,
        family: str = DEFAULT_FAMILY,
        dsn: str | None = None,
        *,
        embed_model: Any = None,
        embed_dim: int | None = None,
        model_name: str | None = None,
        store: Store | None = None,
        storage: str | None = None,
        rerank_factor: int | None = None,
    ) -> None:
        super().__init__(family=family)  # type: ignore[call-arg]  # pydantic sets the declared field
        if embed_model is not None:
            dim = len(embed_model.get_text_embedding("dimension probe"))
            name = model_name or _model_name(embed_model)
        elif embed_dim is None or not model_name:
            raise InvalidInput("give embed_model, or both embed_dim and model_name, of the vectors this family holds")
        else:
            dim, name = embed_dim, model_name
        if embed_dim is not None and embed_dim != dim:
            raise InvalidInput(f"embed_dim {embed_dim} differs from the {dim} dimensions of embed_model")
        self._client = FamilyClient(family, dsn, name, dim, store, storage=storage, rerank_factor=rerank_factor)

    @classmethod
    def class_name(cls) -> str:
        return "RagstoreVectorStore"

    @property
    def client(self) -> Any:
        """The :class:`ragstore.Store` this vector store works through."""
        return self._client.store

    def close(self) -> None:
        """Close the connection pool this vector store opened (a ``store=`` passed in stays open)."""
        self._client.close()

    # --- writing ---------------------------------------------------------------------------------------
    def add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        if not nodes:
            return []
        vectors = as_matrix([node.get_embedding() for node in nodes], len(nodes), self._client.dim, self._client.model)
        items = []
        of_documents: list[tuple[str, str, str]] = []
        for node, vector in zip(nodes, vectors, strict=True):
            metadata = node_to_metadata_dict(node, remove_text=True, flat_metadata=self.flat_metadata)
            record = metadata["_node_content"]
            # The node's own values as every door maps them (LlamaIndex's would make bytes and sets text).
            metadata.update(json_metadata(node.metadata, f"node {node.node_id!r}: metadata"))
            text = node.get_content(metadata_mode="none")  # type: ignore[arg-type]
            items.append(Item(node.node_id, node.ref_doc_id or node.node_id, text, metadata, vector.tolist()))
            if node.ref_doc_id:
                of_documents.append((node.ref_doc_id, record, text))
        since = self._client.server_clock() if of_documents else None
        self._client.write(items)
        if since is not None:
            # After the write, never before it: a failure in between leaves an old copy, never loses a node.
            self._client.delete_earlier_nodes([item.chunk_id for item in items], of_documents, since)
        return [node.node_id for node in nodes]

    async def async_add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        return await asyncio.to_thread(self.add, nodes, **kwargs)

    aadd = async_add

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Delete every node whose ``ref_doc_id`` is ``ref_doc_id``, and no other (a node of no document whose
        own id is ``ref_doc_id`` stays)."""
        self._client.delete_document(ref_doc_id)

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        await asyncio.to_thread(self.delete, ref_doc_id, **delete_kwargs)

    def delete_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **delete_kwargs: Any
    ) -> None:
        if filters is not None:
            raise InvalidInput("delete_nodes takes node_ids; deleting by filters is not supported")
        if node_ids:
            self._client.delete_ids(node_ids)

    def clear(self) -> None:
        self._client.delete_all()

    def get_nodes(self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None) -> list[BaseNode]:
        if filters is not None or node_ids is None:
            raise InvalidInput("get_nodes takes node_ids; reading by filters is not supported")
        return [_node(text, metadata) for _cid, _pkg, text, metadata in self._client.get(node_ids)]

    # --- querying --------------------------------------------------------------------------------------
    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        if query.node_ids:
            raise InvalidInput("querying by node_ids is not supported; use get_nodes")
        metadata = to_ragstore_filter(query.filters)
        if query.doc_ids:
            by_doc = {"ref_doc_id": {"$in": list(query.doc_ids)}}
            metadata = by_doc if metadata is None else {"$and": [metadata, by_doc]}
        k = query.similarity_top_k
        mode = query.mode
        options: dict[str, Any] = {"k": k, "metadata": metadata}
        if mode in (VectorStoreQueryMode.TEXT_SEARCH, VectorStoreQueryMode.SPARSE):
            k = query.sparse_top_k or k
            hits = self._client.search(_text(query), mode="fts", **{**options, "k": k})
        elif mode == VectorStoreQueryMode.HYBRID:
            vector = self._vector(query)
            backend = CallableBackend(self._client.model, self._client.dim, lambda texts: [vector] * len(texts))
            hits = self._client.search(
                _text(query), mode="hybrid", backend=backend, **{**options, "k": query.hybrid_top_k or k}
            )
        elif mode == VectorStoreQueryMode.MMR:
            lam = 0.5 if query.mmr_threshold is None else query.mmr_threshold
            fetch_k = int(kwargs.get("mmr_prefetch_k") or max(20, 4 * k))
            hits = self._client.search(
                vector=self._vector(query), rerank="mmr", mmr_lambda=lam, fetch_k=max(fetch_k, k), **options
            )
        elif mode == VectorStoreQueryMode.DEFAULT:
            hits = self._client.search(vector=self._vector(query), **options)
        else:
            raise InvalidInput(f"query mode {mode.value!r} is not supported: use default, hybrid, text_search or mmr")
        return VectorStoreQueryResult(
            nodes=[_node(hit.text, hit.metadata) for hit in hits],
            similarities=[hit.score for hit in hits],
            ids=[hit.chunk_id for hit in hits],
        )

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        return await asyncio.to_thread(self.query, query, **kwargs)

    def _vector(self, query: VectorStoreQuery) -> list[float]:
        if query.query_embedding is None:
            raise InvalidInput("this query mode needs query_embedding")
        return list(query.query_embedding)


def _text(query: VectorStoreQuery) -> str:
    if not query.query_str or not query.query_str.strip():
        raise InvalidInput("this query mode needs query_str (the full-text leg matches words)")
    return query.query_str


def _model_name(embed_model: Any) -> str:
    return model_name(embed_model)


def _node(text: str, metadata: dict[str, Any]) -> BaseNode:
    node = metadata_dict_to_node(metadata, text=text)
    node.set_content(text)
    return node


def to_ragstore_filter(filters: MetadataFilters | None) -> dict[str, Any] | None:
    """LlamaIndex ``MetadataFilters`` as a ragstore ``metadata=`` filter (see
    :mod:`ragstore.search.metafilter`); InvalidInput for an operator or condition it cannot express."""
    if filters is None or not filters.filters:
        return None
    return _filters(filters)


def _filters(filters: MetadataFilters) -> dict[str, Any]:
    condition = filters.condition or FilterCondition.AND
    if condition not in (FilterCondition.AND, FilterCondition.OR):
        raise InvalidInput(f"filter condition {condition.value!r} is not supported: use and, or")
    parts = [_filters(f) if isinstance(f, MetadataFilters) else _one(f) for f in filters.filters]
    if len(parts) == 1:
        return parts[0]
    return {"$and" if condition == FilterCondition.AND else "$or": parts}


def _one(flt: MetadataFilter) -> dict[str, Any]:
    op = flt.operator
    if op in _COMPARE:
        value: Any = flt.value
        if op in (FilterOperator.IN, FilterOperator.NIN) and not isinstance(value, list):
            value = [value]
        return {flt.key: {_COMPARE[op]: value}}
    if op == FilterOperator.CONTAINS:  # the metadata list holds the value
        return {flt.key: [flt.value]}
    if op == FilterOperator.ALL:
        return {flt.key: list(flt.value) if isinstance(flt.value, list) else [flt.value]}
    if op == FilterOperator.ANY:
        values = flt.value if isinstance(flt.value, list) else [flt.value]
        if not values:
            raise InvalidInput(f"filter on {flt.key!r}: ANY needs at least one value")
        return {"$or": [{flt.key: [v]} for v in values]}
    raise InvalidInput(
        f"filter operator {op.value!r} on {flt.key!r} is not supported: use ==, !=, >, >=, <, <=, in, nin, "
        "contains, any, all"
    )
