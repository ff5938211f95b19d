"""The filtered-plan budget: a fixed row floor, or a small fraction of a large family (planner estimate)."""

import json

import pytest

from ragstore import families
from ragstore.embed.offline import OfflineBackend
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from ragstore.search import filters, vector
from ragstore.search.filters import make_filter


@pytest.fixture
def docs(conn, tmp_path):
    family = families.create_family(conn, "docs", OfflineBackend())
    rows = [
        {"chunk_id": f"c{i:04d}", "package_path": "small/" if i < 80 else "big/", "text": f"t {i}"} for i in range(400)
    ]
    src = tmp_path / "c.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    index_sources(conn, "docs", open_sources([str(src)]))
    conn.execute("ANALYZE ragstore.emb_docs")
    conn.commit()
    return family


def test_budget_is_the_row_floor_on_a_small_family(conn, docs):
    rows, budget = filters.count_with_budget(conn, docs, make_filter("small/", None))
    assert (rows, budget) == (80, filters.FILTER_EXACT_MAX_ROWS)
    assert vector.plan_for(conn, docs, make_filter("small/", None)) == vector.PLAN_EXACT_SUBSET


def test_a_selective_filter_on_a_large_family_goes_exact_a_wide_one_iterative(conn, docs, monkeypatch):
    # Shrink the scale: a floor of 10 rows and "selective" = at most half the family (400 rows -> 200).
    monkeypatch.setattr(filters, "FILTER_EXACT_MAX_ROWS", 10)
    monkeypatch.setattr(filters, "SELECTIVE_FRACTION", 0.5)
    rows, budget = filters.count_with_budget(conn, docs, make_filter("small/", None))
    assert (rows, budget) == (11, 200)  # counted no further than the floor + 1
    assert 40 <= filters.estimated_rows(conn, docs, make_filter("small/", None)) <= 160  # planner: ~80
    assert vector.plan_for(conn, docs, make_filter("small/", None)) == vector.PLAN_EXACT_SUBSET
    assert filters.estimated_rows(conn, docs, make_filter("big/", None)) > 200  # planner: ~320
    assert vector.plan_for(conn, docs, make_filter("big/", None)) == vector.PLAN_ITERATIVE
