"""Eval's batched exact mode ranks exactly as one-query ``search(mode="exact")`` calls do."""

import json

import pytest

from ragstore import families
from ragstore.embed.offline import OfflineBackend
from ragstore.evaluation.datasets import Query
from ragstore.evaluation.runner import ModeSpec, _CachedBackend, _exact_rankings, run_eval
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from ragstore.search.api import search

pytestmark = pytest.mark.usefixtures("each_storage")  # each test once per index storage


def test_batched_exact_rankings_equal_per_query_exact_search(conn, tmp_path):
    family = families.create_family(conn, "docs", OfflineBackend())
    src = tmp_path / "c.jsonl"
    src.write_text(
        "".join(
            json.dumps({"chunk_id": f"c{i:03d}", "package_path": f"p/{i % 7}", "text": f"chunk text {i} {i * i}"})
            + "\n"
            for i in range(300)
        )
    )
    index_sources(conn, "docs", open_sources([str(src)]))
    queries = [Query(query_id=f"q{i}", text=f"query number {i}") for i in range(40)]
    batched = _exact_rankings(conn, family, queries, _CachedBackend(OfflineBackend(), {}), 10)
    for q in queries:
        one = [hit.chunk_id for hit in search(conn, "docs", q.text, k=10, mode="exact")]
        assert batched[q.query_id] == one
    qrels = {q.query_id: {batched[q.query_id][0]: 1} for q in queries}
    result = run_eval(conn, "docs", queries, qrels, [ModeSpec("exact")], k=10)
    assert result.modes[0].report.mrr == 1.0 and len(result.modes[0].latencies_ms) == 40
