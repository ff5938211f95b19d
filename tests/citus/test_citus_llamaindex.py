"""The LlamaIndex adapter on the Citus cluster: re-running ``VectorStoreIndex.from_documents`` over the same
documents leaves one row per node there too (the removal of earlier copies runs on distributed chunks)."""

import pytest

pytest.importorskip("llama_index.core")

from ragstore.integrations.llamaindex import RagstoreVectorStore
from tests.toolkit.llamaindex_ingestion import (
    WordHashEmbedding,
    documents,
    from_documents,
    nodes_per_document,
    rows_by_document,
)

pytestmark = [pytest.mark.citus, pytest.mark.slow, pytest.mark.xdist_group("citus")]


def test_from_documents_twice_and_an_edit_leave_one_row_per_node_on_the_cluster(citus_dsn: str) -> None:
    embed = WordHashEmbedding()
    store = RagstoreVectorStore("li_citus", citus_dsn, embed_model=embed)
    try:
        from_documents(store, embed, documents())
        from_documents(store, embed, documents(), insert_batch_size=7)
        assert rows_by_document(store) == nodes_per_document(documents())
        edited = documents(edit="comets")
        from_documents(store, embed, edited)
        assert rows_by_document(store) == nodes_per_document(edited)
    finally:
        store.drop()
        store.close()
