"""Metadata filters with operators ($eq … $nin, $and/$or) on every search path, against Python's answer."""

import pytest

from ragstore import families
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import InvalidInput
from ragstore.search import search
from ragstore.search import vector as vec
from ragstore.search.api import run_vector
from ragstore.search.request import make_filter
from tests.toolkit.metafilter import ok
from tests.toolkit.search import clustered, load

pytestmark = pytest.mark.usefixtures("each_storage")  # each test once per index storage

N = 300


def meta(i):
    row = {"n": i, "lang": ["en", "fr", "de"][i % 3], "title": f"t{i % 7}"}
    if i % 5 == 0:
        row["draft"] = True
    return row


FILTERS = [
    {"lang": {"$eq": "fr"}},
    {"lang": {"$ne": "fr"}},
    {"n": {"$gt": 250}},
    {"n": {"$gte": 250, "$lt": 260}},
    {"n": {"$lte": 3}},
    {"title": {"$gt": "t4"}},
    {"lang": {"$in": ["en", "de"]}},
    {"lang": {"$nin": ["en", "de"]}},
    {"draft": {"$eq": True}},
    {"draft": {"$ne": True}},
    {"$or": [{"n": {"$lt": 5}}, {"n": {"$gt": 295}}]},
    {"$and": [{"lang": "en"}, {"n": {"$in": [0, 3, 6, 7]}}]},
    {"lang": "de", "n": {"$gte": 290}},
    {"$or": [{"$and": [{"lang": "fr"}, {"n": {"$lt": 20}}]}, {"title": {"$eq": "t0"}, "n": {"$gt": 280}}]},
    {"n": {"$in": []}},
]


@pytest.fixture
def loaded(conn):
    fam = families.create_family(conn, "docs", OfflineBackend())
    ids = load(conn, fam, clustered(N), metadata=[meta(i) for i in range(N)])
    return fam, ids


@pytest.mark.slow
@pytest.mark.parametrize("flt", FILTERS, ids=[str(f) for f in FILTERS])
def test_every_plan_keeps_exactly_the_rows_python_keeps(conn, loaded, flt):
    fam, ids = loaded
    expected = {ids[i] for i in range(N) if ok(meta(i), flt)}
    q = clustered(1, seed=5)[0]
    for plan in (vec.PLAN_EXACT_SUBSET, vec.PLAN_ITERATIVE, None):
        hits = run_vector(conn, fam, q, k=N, flt=make_filter(None, flt), plan=plan)
        assert {h.chunk_id for h in hits} <= expected
        if plan == vec.PLAN_EXACT_SUBSET:
            assert {h.chunk_id for h in hits} == expected
    exact = search(conn, "docs", vector=q, k=N, mode="exact", metadata=flt)
    assert {h.chunk_id for h in exact} == expected
    top = search(conn, "docs", vector=q, k=10, metadata=flt)
    assert [h.chunk_id for h in top] == [h.chunk_id for h in exact[:10]]
    fts = search(conn, "docs", "text", k=N, mode="fts", metadata=flt)
    assert {h.chunk_id for h in fts} == expected


def test_plain_containment_keeps_its_meaning(conn, loaded):
    q = clustered(1, seed=5)[0]
    hits = search(conn, "docs", vector=q, k=N, mode="exact", metadata={"lang": "fr", "draft": True})
    assert {int(h.chunk_id[1:]) for h in hits} == {i for i in range(N) if i % 3 == 1 and i % 5 == 0}


@pytest.mark.parametrize(
    ("flt", "words"),
    [
        ({"n": {"$regex": "x"}}, "unknown comparison '$regex'"),
        ({"$not": {"n": 1}}, "unknown filter operator '$not'"),
        ({"$or": []}, "$or: takes a non-empty list"),
        ({"n": {"$gt": [1]}}, "compares with a number or a text"),
        ({"n": {"$gt": True}}, "compares with a number or a text"),
        ({"n": {"$in": "abc"}}, "takes a list of scalars"),
        ({"n": {"$in": [[1]]}}, "takes a list of scalars"),
        ({"$and": [{}]}, "non-empty JSON object"),
        ({"n": {"$eq": 1, "plain": 2}}, "unknown comparison 'plain'"),
    ],
)
def test_what_operators_cannot_express_is_refused_before_any_query(flt, words):
    with pytest.raises(InvalidInput) as err:
        make_filter(None, flt)
    assert words in str(err.value)
