"""The eval runner: every plain mode through the search it is given, queries embedded once, latency and deltas
arithmetic."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from ragstore.embed.offline import OfflineBackend
from ragstore.errors import InvalidInput
from ragstore.evaluation.datasets import Query
from ragstore.evaluation.runner import ModeSpec, format_table, p95, run_eval
from ragstore.families import Family
from ragstore.search.request import Hit

FAMILY = Family("docs", "offline", "fingerprint-v1", 16, "vector", "emb_docs", "ready", {})
QUERIES = [Query(query_id="q1", text="alpha"), Query(query_id="q2", text="beta"), Query(query_id="q3", text="gamma")]
QRELS = {"q1": {"a": 2, "b": 1}, "q2": {"b": 1}, "q3": {"zz": 0}}
# what each fake mode returns per query text
RESULTS = {
    "hnsw": {"alpha": ["a", "b"], "beta": ["x", "b"], "gamma": ["a"]},
    "fts": {"alpha": ["b", "a"], "beta": ["b"], "gamma": []},
}


class CountingBackend(OfflineBackend):
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: Any) -> Any:
        self.calls.append(list(texts))
        return super().embed(texts)


class RecordingSearch:
    """A search that answers RESULTS and records each call (the family is given whole: no database)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, conn: Any, family: str, query: str | None = None, **kwargs: Any) -> list[Hit]:
        assert query is not None
        self.calls.append({"family": family, "query": query, **kwargs})
        if kwargs["mode"] != "fts":
            kwargs["backend"].embed([query])  # as api.search does: must be served from the cache
        return [Hit(cid, "p", 1.0, "") for cid in RESULTS[kwargs["mode"]][query]]


@pytest.fixture
def fake_search() -> RecordingSearch:
    return RecordingSearch()


def test_modes_are_scored_with_deltas_against_the_first(fake_search: RecordingSearch) -> None:
    backend = CountingBackend()
    ticks = itertools.count()
    result = run_eval(
        None,  # type: ignore[arg-type]
        FAMILY, QUERIES, QRELS, [ModeSpec("hnsw"), ModeSpec("fts")], k=2, backend=backend,
        clock=lambda: float(next(ticks)), search=fake_search,
    )  # fmt: skip
    exact, fts = result.modes  # the first mode (hnsw) is the A of the A/B
    assert exact.report.evaluated == 2 and exact.report.skipped == ("q3",)
    assert exact.report.mrr == pytest.approx((1.0 + 0.5) / 2)
    assert fts.report.mrr == pytest.approx(1.0)
    assert result.deltas(1)["mrr"] == pytest.approx(0.25)
    assert result.deltas(0)["ndcg"] == 0.0
    # each search call spans exactly one clock tick: 1,000 ms
    assert exact.latencies_ms == [1000.0, 1000.0, 1000.0] and exact.p95_ms == 1000.0
    # embedded once, in one batch, before any search; the searches hit the cache
    assert backend.calls == [["alpha", "beta", "gamma"]]
    calls = fake_search.calls
    assert {c["mode"] for c in calls} == {"hnsw", "fts"} and all(c["k"] == 2 and c["family"] == "docs" for c in calls)
    table = format_table(result)
    assert "Δ fts" in table and "+0.2500" in table and "1 skipped" in table
    data = result.as_dict()
    assert data["modes"][1]["deltas"]["mrr"] == 0.25 and data["modes"][0]["latency_ms"]["p95"] == 1000.0


def test_fts_only_runs_embed_nothing(fake_search: RecordingSearch) -> None:
    backend = CountingBackend()
    result = run_eval(
        None,  # type: ignore[arg-type]
        FAMILY, QUERIES, QRELS, [ModeSpec("fts")], backend=backend, search=fake_search,
    )  # fmt: skip
    assert backend.calls == [] and len(fake_search.calls) == 3 and result.family == "docs"


@pytest.mark.parametrize(
    "spec",
    [
        ModeSpec("vector"),
        ModeSpec("hnsw", rerank="rrf"),
        ModeSpec("fts", weights={"fts": 1.0}),
        ModeSpec("exact", "blend"),
    ],
)
def test_bad_mode_specs_are_refused_before_any_search(fake_search: RecordingSearch, spec: ModeSpec) -> None:
    with pytest.raises(InvalidInput):
        run_eval(None, FAMILY, QUERIES, QRELS, [spec], backend=OfflineBackend(), search=fake_search)  # type: ignore[arg-type]
    assert fake_search.calls == []


def test_no_modes_is_refused() -> None:
    with pytest.raises(InvalidInput, match="at least one mode"):
        run_eval(None, FAMILY, QUERIES, QRELS, [])  # type: ignore[arg-type]


def test_labels_name_weights_and_rerank() -> None:
    assert ModeSpec("hybrid", "mmr", {"vector": 1.0, "fts": 0.5}).label == "hybrid[fts=0.5,vector=1]+mmr"
    assert ModeSpec("hnsw").label == "hnsw"


@pytest.mark.parametrize(
    ("values", "expected"),
    [([], 0.0), ([5.0], 5.0), (list(map(float, range(1, 21))), 19.0), (list(map(float, range(100, 0, -1))), 95.0)],
)
def test_p95_is_the_nearest_rank_percentile(values: list[float], expected: float) -> None:
    assert p95(values) == expected


def test_cached_backend_keeps_the_family_identity() -> None:
    from ragstore.evaluation.runner import _CachedBackend

    real = CountingBackend()
    cached = _CachedBackend(real, {"a": np.ones(16, dtype=np.float32)})
    assert (cached.name, cached.model, cached.dim) == (real.name, real.model, real.dim)
    out = cached.embed(["a", "b"])
    assert out.shape == (2, 16) and out.dtype == np.float32 and real.calls == [["b"]]
    assert np.array_equal(out[0], np.ones(16, dtype=np.float32))
