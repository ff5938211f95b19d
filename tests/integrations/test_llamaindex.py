"""The LlamaIndex adapter: the checks of LlamaIndex's own Postgres vector-store tests, sync and async, and
the two that store fails (a filtered query returns k nodes; re-adding the same nodes duplicates nothing)."""

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

from ragstore.errors import InvalidInput, ModelMismatch
from ragstore.integrations.llamaindex import RagstoreVectorStore

DIM = 2


def vec(x):
    return [x] + [1.0] * (DIM - 1)


def nodes():
    def node(text, id_, source, meta, x):
        rel = {NodeRelationship.SOURCE: RelatedNodeInfo(node_id=source)}
        return TextNode(text=text, id_=id_, relationships=rel, extra_info=meta, embedding=vec(x))

    return [
        node("lorem ipsum", "aaa", "aaa", {"test_num": 1}, 1.0),
        node("dolor sit amet", "bbb", "bbb", {"test_key": "test_value"}, 0.1),
        node("consectetur adipiscing elit", "ccc", "ccc", {"test_key_list": ["test_value"]}, 0.1),
        node("sed do eiusmod tempor", "ddd", "ccc", {"test_key_2": "test_val_2"}, 0.1),
    ]


@pytest.fixture
def pg(dsn):
    store = RagstoreVectorStore("lorem", dsn, embed_dim=DIM, model_name="test-model")
    yield store
    store.close()


async def add(pg, items, use_async):
    return await pg.async_add(items) if use_async else pg.add(items)


async def query(pg, q, use_async):
    return await pg.aquery(q) if use_async else pg.query(q)


def by_filter(*filters, condition=FilterCondition.AND):
    return MetadataFilters(filters=list(filters), condition=condition)


@pytest.mark.parametrize("use_async", [True, False])
async def test_add_and_query(pg, use_async):
    await add(pg, nodes(), use_async)
    res = await query(pg, VectorStoreQuery(query_embedding=vec(1.0), similarity_top_k=1), use_async)
    assert [n.node_id for n in res.nodes] == ["aaa"] and res.ids == ["aaa"]
    assert res.nodes[0].get_content() == "lorem ipsum" and res.nodes[0].metadata == {"test_num": 1}


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        (by_filter(MetadataFilter(key="test_key", value="test_value")), ["bbb"]),
        (by_filter(MetadataFilter(key="test_key", value=["test_value", "x"], operator=FilterOperator.IN)), ["bbb"]),
        (by_filter(MetadataFilter(key="test_key", value=["test_value"], operator=FilterOperator.IN)), ["bbb"]),
        (by_filter(MetadataFilter(key="test_key_list", value="test_value", operator=FilterOperator.CONTAINS)), ["ccc"]),
        (by_filter(MetadataFilter(key="test_num", value=1, operator=FilterOperator.GTE)), ["aaa"]),
        (by_filter(MetadataFilter(key="test_num", value=1, operator=FilterOperator.LT)), []),
        (by_filter(MetadataFilter(key="test_key", value="other", operator=FilterOperator.NE)), ["bbb"]),
        (by_filter(MetadataFilter(key="test_key", value=["test_value"], operator=FilterOperator.NIN)), []),
        (
            by_filter(
                MetadataFilter(key="test_num", value=1),
                MetadataFilter(key="test_key_2", value="test_val_2"),
                condition=FilterCondition.OR,
            ),
            ["aaa", "ddd"],
        ),
        (
            by_filter(
                MetadataFilter(key="test_num", value=1),
                by_filter(MetadataFilter(key="test_key", value="test_value"), MetadataFilter(key="test_num", value=2)),
                condition=FilterCondition.OR,
            ),
            ["aaa"],
        ),
    ],
)
@pytest.mark.parametrize("use_async", [True, False])
async def test_metadata_filters(pg, flt, expected, use_async):
    await add(pg, nodes(), use_async)
    res = await query(pg, VectorStoreQuery(query_embedding=vec(0.5), similarity_top_k=10, filters=flt), use_async)
    assert sorted(n.node_id for n in res.nodes) == expected


def test_unsupported_filters_are_refused(pg):
    pg.add(nodes())
    for flt in (
        by_filter(MetadataFilter(key="test_key", value="x", operator=FilterOperator.TEXT_MATCH)),
        by_filter(MetadataFilter(key="test_key", value="x"), condition=FilterCondition.NOT),
    ):
        with pytest.raises(InvalidInput, match="not supported"):
            pg.query(VectorStoreQuery(query_embedding=vec(0.5), similarity_top_k=10, filters=flt))


@pytest.mark.parametrize("use_async", [True, False])
async def test_delete_removes_every_node_of_the_document(pg, use_async):
    await add(pg, nodes(), use_async)
    if use_async:
        await pg.adelete("ccc")
    else:
        pg.delete("ccc")
    res = pg.query(VectorStoreQuery(query_embedding=vec(0.1), similarity_top_k=10))
    assert sorted(n.node_id for n in res.nodes) == ["aaa", "bbb"]


@pytest.mark.parametrize("use_async", [True, False])
async def test_text_search_and_hybrid(pg, use_async):
    rel = {NodeRelationship.SOURCE: RelatedNodeInfo(node_id="d")}
    items = [
        TextNode(text="lorem ipsum", id_="aaa", relationships=rel, embedding=vec(0.1)),
        TextNode(text="dolor sit amet", id_="bbb", relationships=rel, embedding=vec(1.0)),
        TextNode(
            text="The quick brown fox jumped over the lazy dog.", id_="ccc", relationships=rel, embedding=vec(5.0)
        ),
        TextNode(text="The fox and the hound", id_="ddd", relationships=rel, embedding=vec(10.0)),
    ]
    await add(pg, items, use_async)
    sparse = VectorStoreQuery(
        query_embedding=vec(0.1), query_str="who is the fox?", sparse_top_k=2, mode=VectorStoreQueryMode.SPARSE
    )
    res = await query(pg, sparse, use_async)
    assert sorted(n.node_id for n in res.nodes) == ["ccc", "ddd"]
    hybrid = VectorStoreQuery(
        query_embedding=vec(0.1), query_str="fox", similarity_top_k=4, mode=VectorStoreQueryMode.HYBRID
    )
    res = await query(pg, hybrid, use_async)
    assert {"ccc", "ddd"} <= {n.node_id for n in res.nodes}


def test_mmr_mode(pg):
    pg.add(nodes())
    q = VectorStoreQuery(query_embedding=vec(1.0), similarity_top_k=2, mode=VectorStoreQueryMode.MMR, mmr_threshold=0.5)
    res = pg.query(q)
    assert len(res.nodes) == 2 and res.nodes[0].node_id == "aaa"


@pytest.mark.slow
def test_filtered_query_returns_k_nodes(dsn):
    """LlamaIndex's PGVectorStore filters after its HNSW scan and returns fewer than k; ragstore returns k."""
    store = RagstoreVectorStore("many", dsn, embed_dim=8, model_name="test-model")
    import numpy as np

    rng = np.random.default_rng(0)
    items = [
        TextNode(
            text=f"node {i}",
            id_=f"n{i:04d}",
            extra_info={"rare": "yes" if i % 100 == 0 else "no"},
            embedding=rng.normal(size=8).tolist(),
        )
        for i in range(3000)
    ]
    store.add(items)
    flt = by_filter(MetadataFilter(key="rare", value="yes"))
    for seed in range(3):
        q = VectorStoreQuery(
            query_embedding=np.random.default_rng(seed + 10).normal(size=8).tolist(), similarity_top_k=10, filters=flt
        )
        res = store.query(q)
        assert len(res.nodes) == 10 and all(n.metadata["rare"] == "yes" for n in res.nodes)
    store.close()


@pytest.mark.parametrize("use_async", [True, False])
async def test_re_adding_the_same_nodes_does_not_duplicate(pg, use_async):
    await add(pg, nodes(), use_async)
    await add(pg, nodes(), use_async)
    assert pg._client.count() == 4
    changed = nodes()[:1]
    changed[0].text = "lorem ipsum, edited"
    await add(pg, changed, use_async)
    assert pg._client.count() == 4
    res = pg.query(VectorStoreQuery(query_embedding=vec(1.0), similarity_top_k=1))
    assert res.nodes[0].get_content() == "lorem ipsum, edited"


def test_family_refuses_another_model(dsn, pg):
    with pytest.raises(ModelMismatch):
        RagstoreVectorStore("lorem", dsn, embed_dim=3, model_name="test-model")
    with pytest.raises(ModelMismatch):
        RagstoreVectorStore("lorem", dsn, embed_dim=DIM, model_name="other-model")
    with pytest.raises(InvalidInput, match="embed_model"):
        RagstoreVectorStore("lorem", dsn)


def test_delete_of_a_document_keeps_a_standalone_node_of_the_same_id(pg):
    # "ccc" is a document (nodes ccc and ddd) and, below, also the id of a node that belongs to no document.
    items = [n for n in nodes() if n.node_id != "ccc"]
    items.append(TextNode(text="a node of no document", id_="ccc", embedding=vec(0.2)))
    items.append(
        TextNode(
            text="another of document ccc",
            id_="eee",
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="ccc")},
            embedding=vec(0.3),
        )
    )
    pg.add(items)
    in_doc = pg.query(VectorStoreQuery(query_embedding=vec(0.1), similarity_top_k=10, doc_ids=["ccc"]))
    assert sorted(in_doc.ids) == ["ddd", "eee"]
    pg.delete("ccc")
    res = pg.query(VectorStoreQuery(query_embedding=vec(0.1), similarity_top_k=10))
    assert sorted(res.ids) == ["aaa", "bbb", "ccc"]


def test_the_store_creates_its_family_in_the_storage_asked_for(dsn):
    from ragstore import families
    from ragstore.db.connection import connect

    store = RagstoreVectorStore("halved", dsn, embed_dim=DIM, model_name="test-model", storage="halfvec")
    try:
        with connect(dsn) as conn:
            assert families.get_family(conn, "halved").storage == "halfvec"
    finally:
        store.close()
