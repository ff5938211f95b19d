# ruff: noqa: F811  (the fixtures imported below are arguments of the tests)
"""The LlamaIndex adapter through LlamaIndex's own ingestion paths: ``VectorStoreIndex.from_documents``,
``IngestionPipeline`` with and without a docstore, ``refresh_ref_docs`` and ``delete_ref_doc``.

LlamaIndex's splitter draws new node ids on every run; re-running any of these over the same documents
must leave one row per node and every hit once, an edited document must leave only its new nodes, and
nothing of another document or another family may go."""

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import VectorStoreIndex
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.storage.docstore import SimpleDocumentStore

from ragstore.integrations.llamaindex import RagstoreVectorStore
from tests.toolkit.llamaindex_ingestion import (  # noqa: F401  (fixtures)
    SPLITTER,
    documents,
    embed,
    from_documents,
    nodes_per_document,
    rows_by_document,
    store,
)


def rows(store):
    return store._client.count()


def hit_texts(index, question, k=10):
    return [h.node.get_content() for h in index.as_retriever(similarity_top_k=k).retrieve(question)]


def test_from_documents_twice_leaves_one_row_per_node_and_each_hit_once(store, embed):
    docs = documents()
    expected = nodes_per_document(docs)
    assert all(n > 1 for n in expected.values())
    first = from_documents(store, embed, docs)
    assert rows_by_document(store) == expected
    first_ids = {h.node.node_id for h in first.as_retriever(similarity_top_k=5).retrieve("comets")}
    index = from_documents(store, embed, documents())
    assert rows_by_document(store) == expected
    texts = hit_texts(index, "notes on comets reason")
    assert len(texts) == 10 and len(set(texts)) == 10
    # The second run's nodes replaced the first's (LlamaIndex drew new ids), not the other way round.
    second_ids = {h.node.node_id for h in index.as_retriever(similarity_top_k=5).retrieve("comets")}
    assert first_ids.isdisjoint(second_ids)


def test_from_documents_in_small_batches_keeps_every_node_of_a_document_split_across_adds(store, embed):
    """LlamaIndex adds nodes in batches of insert_batch_size: a document straddling two adds keeps both
    halves, on the first run and on the re-run."""
    docs = documents()
    expected = nodes_per_document(docs)
    for _ in range(2):
        from_documents(store, embed, documents(), insert_batch_size=7)
        assert rows_by_document(store) == expected


@pytest.mark.slow
def test_an_edited_document_leaves_only_its_new_nodes(store, embed):
    from_documents(store, embed, documents())
    edited = documents(edit="dolphins")
    index = from_documents(store, embed, edited, insert_batch_size=5)
    assert rows_by_document(store) == nodes_per_document(edited)
    texts = hit_texts(index, "edited sentence on dolphins", k=40)
    assert any("An edited sentence on dolphins" in t for t in texts)
    assert not any("Sentence 3 of the notes on dolphins" in t for t in texts)


def test_ingestion_pipeline_without_a_docstore_twice_duplicates_nothing(store, embed):
    docs = documents()
    for _ in range(2):  # two pipelines: no shared cache, new node ids each run
        IngestionPipeline(transformations=[SPLITTER, embed], vector_store=store).run(documents=documents())
    assert rows_by_document(store) == nodes_per_document(docs)


def test_ingestion_pipeline_with_a_docstore_upserts_an_edited_document(store, embed):
    docstore = SimpleDocumentStore()
    pipeline = IngestionPipeline(transformations=[SPLITTER, embed], vector_store=store, docstore=docstore)
    assert len(pipeline.run(documents=documents())) == sum(nodes_per_document(documents()).values())
    assert pipeline.run(documents=documents()) == []  # unchanged: the docstore skips every document
    edited = documents(edit="forests")
    pipeline.run(documents=edited)
    assert rows_by_document(store) == nodes_per_document(edited)


@pytest.mark.slow
def test_refresh_ref_docs_and_delete_ref_doc(store, embed):
    index = from_documents(store, embed, documents())
    edited = documents(edit="glaciers")
    refreshed = index.refresh_ref_docs(edited)
    assert refreshed == [doc.id_ == "doc-glaciers" for doc in edited]
    assert rows_by_document(store) == nodes_per_document(edited)
    index.delete_ref_doc("doc-glaciers", delete_from_docstore=True)
    expected = nodes_per_document(edited)
    del expected["doc-glaciers"]
    assert rows_by_document(store) == expected
    # A new index over the same store (a new process: an empty docstore) refreshes without duplicating.
    fresh = VectorStoreIndex.from_vector_store(store, embed_model=embed, transformations=[SPLITTER])
    fresh.refresh_ref_docs(documents())
    assert rows_by_document(store) == nodes_per_document(documents())


@pytest.mark.slow
def test_a_re_run_deletes_nothing_another_document_or_family_owns(dsn, store, embed):
    """Nodes added by hand to the same document (no offsets, no version), a standalone node named like the
    document, another family's copy of the same documents: a re-run of from_documents keeps them all."""
    other = RagstoreVectorStore("li_other", dsn, embed_model=embed)
    try:
        from_documents(other, embed, documents())
        other_rows = rows_by_document(other)
        from_documents(store, embed, documents())
        source = {NodeRelationship.SOURCE: RelatedNodeInfo(node_id="doc-apples")}
        by_hand = [
            TextNode(id_="hand-1", text="A note on apples added by hand.", relationships=source),
            TextNode(id_="doc-bridges", text="A node of no document, named like one."),
        ]
        for node in by_hand:
            node.embedding = embed.get_text_embedding(node.text)
        store.add(by_hand)
        from_documents(store, embed, documents())
        edited = documents(edit="apples")
        from_documents(store, embed, edited)
        expected = nodes_per_document(edited)
        expected["doc-apples"] += 1  # hand-1
        expected["doc-bridges"] += 1  # the standalone node is stored under its own id
        assert rows_by_document(store) == expected
        assert {n.node_id for n in store.get_nodes(["hand-1", "doc-bridges"])} == {"hand-1", "doc-bridges"}
        assert rows_by_document(other) == other_rows
    finally:
        other.drop()
        other.close()


@pytest.mark.slow
def test_two_runs_at_once_never_remove_each_others_nodes(dsn, embed):
    """Two processes re-indexing the same documents at once: whatever the interleaving, every node is
    stored at least once (neither run removes the other's copies); a later run leaves one copy each."""
    from concurrent.futures import ThreadPoolExecutor

    stores = [RagstoreVectorStore("li_race", dsn, embed_model=embed) for _ in range(2)]
    try:
        from_documents(stores[0], embed, documents())
        with ThreadPoolExecutor(2) as pool:
            runs = [pool.submit(from_documents, s, embed, documents(), insert_batch_size=9) for s in stores]
            for run in runs:
                run.result()
        expected = nodes_per_document(documents())
        found = rows_by_document(stores[0])
        assert found.keys() == expected.keys()
        assert all(found[doc] >= n for doc, n in expected.items())
        with stores[0]._client.store.connection() as conn:
            distinct = conn.execute(
                "SELECT count(DISTINCT (package_path, text)) FROM ragstore.chunks WHERE family = 'li_race'"
            ).fetchone()[0]
        assert distinct == sum(expected.values())
        from_documents(stores[1], embed, documents())
        assert rows_by_document(stores[0]) == expected
    finally:
        for s in stores:
            s.close()
