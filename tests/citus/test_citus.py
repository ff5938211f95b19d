"""ragstore on a real local Citus cluster (coordinator + 2 workers): the same answers as one node.

Every test here runs against the cluster of tests/citus/conftest.py (skipped when Citus is not built),
in one xdist group so that one worker holds the cluster; marked slow (the cluster takes ~30 s to start).
"""

import json
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from ragstore import families
from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import DatabaseUnavailable, RagstoreError
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from ragstore.search.api import search
from tests.toolkit.citus import digest

pytestmark = [pytest.mark.citus, pytest.mark.slow, pytest.mark.xdist_group("citus")]

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample.jsonl"


def index(conn: psycopg.Connection[Any], family: str, path: Path, **kw: Any) -> Any:
    return index_sources(conn, family, open_sources([str(path)]), backend=kw.pop("backend", None), **kw)


def synthetic(path: Path, n: int) -> Path:
    """n chunks: 1% under package one/, 10% under ten/, the rest under rest/."""
    lines = []
    for i in range(n):
        package = "one/p" if i % 100 == 0 else ("ten/p" if i % 10 == 1 else "rest/p")
        lines.append(
            json.dumps(
                {"chunk_id": f"s{i:05d}", "package_path": f"{package}{i % 7}", "text": f"row {i} x{i * 7919 % 104729}"}
            )
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_layout_distributes_chunks_and_the_family_on_both_workers(citus_dsn: str) -> None:
    with connect(citus_dsn) as conn:
        families.create_family(conn, "layout", OfflineBackend())
        conn.commit()
        kinds = dict(
            conn.execute(
                "SELECT logicalrelid::regclass::text, partmethod::text || coalesce(column_to_column_name(logicalrelid, "
                "partkey), '') FROM pg_dist_partition WHERE logicalrelid::regclass::text LIKE 'ragstore.%'"
            ).fetchall()
        )
        assert kinds["ragstore.chunks"] == "hchunk_id"
        assert kinds["ragstore.emb_layout"] == "hchunk_id"
        assert kinds["ragstore.chunk_terms"] == "hchunk_id"  # the full-text postings, beside their chunks
        assert kinds["ragstore.families"] == "n"
        assert kinds["ragstore.embedding_cache"] == "n"
        assert "ragstore.memory" not in kinds  # kept on the coordinator, with the bindings it reads
        assert "ragstore.agent_principals" not in kinds
        colocation = conn.execute(
            "SELECT count(DISTINCT colocationid) FROM pg_dist_partition "
            "WHERE logicalrelid IN ('ragstore.chunks'::regclass, 'ragstore.emb_layout'::regclass, "
            "'ragstore.chunk_terms'::regclass)"
        ).fetchone()
        assert colocation == (1,)
        ports = conn.execute(
            "SELECT DISTINCT nodeport FROM citus_shards WHERE table_name = 'ragstore.emb_layout'::regclass"
        ).fetchall()
        workers = conn.execute("SELECT nodeport FROM pg_dist_node WHERE groupid <> 0").fetchall()
        assert sorted(ports) == sorted(workers) and len(workers) == 2


def test_same_tables_and_exact_answers_as_one_node(citus_dsn: str, dsn: str) -> None:
    results = {}
    for name, target in (("cluster", citus_dsn), ("single", dsn)):
        with connect(target) as conn:
            families.create_family(conn, "same", OfflineBackend())
            conn.commit()
            first = index(conn, "same", SAMPLE)
            again = index(conn, "same", SAMPLE)
            assert again.inserted == again.updated == 0 and again.unchanged == first.inserted
            texts = [
                r[0]
                for r in conn.execute(
                    "SELECT text FROM ragstore.chunks WHERE family = 'same' ORDER BY chunk_id LIMIT 50"
                )
            ]
            answers = [
                [(h.chunk_id, round(h.score, 6)) for h in search(conn, "same", t[:80], mode="exact", k=5)]
                for t in texts
            ]
            filtered = [
                [h.chunk_id for h in search(conn, "same", t[:80], mode="exact", k=5, package="man1/")]
                for t in texts[:10]
            ]
            results[name] = (digest(conn, "same"), answers, filtered)
    assert results["cluster"][0] == results["single"][0]
    assert results["cluster"][1] == results["single"][1]
    assert results["cluster"][2] == results["single"][2]


# Full-text and hybrid queries: plain words (any word matches), websearch operators (strict meaning),
# words no chunk holds, stopwords only.
TEXT_QUERIES = (
    "certificate",
    "openssl certificate command",
    "script perl",
    "file input output",
    "bash completion directory",
    '"command line"',
    "openssl -perl",
    "grep or awk",
    "zzzunknownword",
    "the of and",
)


def text_answers(conn: psycopg.Connection[Any], family: str) -> list[list[tuple[Any, ...]]]:
    """fts and hybrid hits (id, score, leg scores, leg ranks) of TEXT_QUERIES, plus filtered and auto ones."""
    runs: list[tuple[str, str, dict[str, Any]]] = [(q, m, {}) for q in TEXT_QUERIES for m in ("fts", "hybrid")]
    runs += [("openssl certificate", m, {"package": "man1/"}) for m in ("fts", "hybrid")]
    runs += [("command", "auto", {}), ("command", "hybrid", {"metadata": {"nothing": 1}})]
    return [
        [
            (h.chunk_id, h.score, sorted((h.scores or {}).items()), sorted((h.ranks or {}).items()))
            for h in search(conn, family, q, mode=mode, k=8, **kw)
        ]
        for q, mode, kw in runs
    ]


def assert_same_answers(cluster: list[list[tuple[Any, ...]]], single: list[list[tuple[Any, ...]]]) -> None:
    assert len(cluster) == len(single)
    for got, want in zip(cluster, single, strict=True):
        assert [h[0] for h in got] == [h[0] for h in want]
        assert [h[3] for h in got] == [h[3] for h in want]
        for g, w in zip(got, want, strict=True):
            assert g[1] == pytest.approx(w[1], abs=1e-9, rel=0)
            assert [name for name, _ in g[2]] == [name for name, _ in w[2]]
            for (_, gs), (_, ws) in zip(g[2], w[2], strict=True):
                assert (gs is None) == (ws is None)
                assert gs is None or gs == pytest.approx(ws, abs=1e-9, rel=0)


def test_full_text_and_hybrid_give_the_single_node_answers(citus_dsn: str, dsn: str, tmp_path: Path) -> None:
    corpus = tmp_path / "small.jsonl"
    corpus.write_text("".join(SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:80]), encoding="utf-8")
    changed = tmp_path / "changed.jsonl"
    rows = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines()]
    rows[3]["text"] = "zebra certificate zebra openssl: " + rows[3]["text"]
    changed.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    results = {}
    for name, target in (("cluster", citus_dsn), ("single", dsn)):
        with connect(target) as conn:
            families.create_family(conn, "lexical", OfflineBackend())
            conn.commit()
            index(conn, "lexical", corpus)
            before = text_answers(conn, "lexical")
            assert search(conn, "lexical", "zebra", mode="fts") == []
            index(conn, "lexical", changed)
            after = text_answers(conn, "lexical")
            zebra = [h.chunk_id for h in search(conn, "lexical", "zebra", mode="fts")]
            results[name] = (before, after, zebra)
    assert any(results["single"][0]) and results["single"][0] != results["single"][1]
    assert_same_answers(results["cluster"][0], results["single"][0])
    assert_same_answers(results["cluster"][1], results["single"][1])
    assert results["cluster"][2] == results["single"][2] == [rows[3]["chunk_id"]]


def test_hnsw_recall_on_the_cluster_unfiltered_and_filtered(citus_dsn: str, tmp_path: Path) -> None:
    with connect(citus_dsn) as conn:
        families.create_family(conn, "recall", OfflineBackend())
        conn.commit()
        index(conn, "recall", synthetic(tmp_path / "s.jsonl", 3000))
        rng = np.random.default_rng(7)
        for package, floor in ((None, 0.95), ("one/", 0.99), ("ten/", 0.99)):
            recalls = []
            for _ in range(20):
                q = rng.standard_normal(16).astype(np.float32)
                truth = [h.chunk_id for h in search(conn, "recall", vector=q, mode="exact", k=10, package=package)]
                found = [h.chunk_id for h in search(conn, "recall", vector=q, mode="hnsw", k=10, package=package)]
                assert len(found) == 10, (package, found)
                recalls.append(len(set(found) & set(truth)) / len(truth))
            assert np.mean(recalls) >= floor, (package, np.mean(recalls))


class StopWorkerBackend(OfflineBackend):
    """The offline backend; stops a worker of the cluster when asked to embed its second batch."""

    def __init__(self, node: Any) -> None:
        self.node = node
        self.batches = 0

    def embed(self, texts):  # type: ignore[no-untyped-def]
        self.batches += 1
        if self.batches == 2:
            self.node.stop()
        return super().embed(texts)


def test_a_worker_stopped_mid_index_fails_clearly_and_a_rerun_completes(
    citus_cluster: Any, citus_dsn: str, tmp_path: Path
) -> None:
    source = synthetic(tmp_path / "w.jsonl", 600)
    worker = citus_cluster.nodes()[2]
    with connect(citus_dsn) as conn:
        families.create_family(conn, "crash", OfflineBackend())
        conn.commit()
        with pytest.raises(RagstoreError) as caught:
            index(conn, "crash", source, backend=StopWorkerBackend(worker), batch_size=100)
    assert isinstance(caught.value, DatabaseUnavailable) or "connection" in str(caught.value).lower(), caught.value
    citus_cluster.start(2)
    with connect(citus_dsn) as conn:
        report = index(conn, "crash", source)
        assert report.inserted + report.updated + report.unchanged == 600
        rows = conn.execute("SELECT count(*) FROM ragstore.emb_crash").fetchone()
        chunks = conn.execute("SELECT count(*) FROM ragstore.chunks WHERE family = 'crash'").fetchone()
        assert rows == chunks == (600,)
