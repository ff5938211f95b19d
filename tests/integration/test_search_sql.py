"""The SQL functions for people, ragstore.search(family, vector, k) and ragstore.search_text(family, text, k),
against the library's own results, their errors, and migration 0002 going down and up again."""

import math

import numpy as np
import psycopg
import pytest
from pgvector import Vector

from ragstore import families
from ragstore.embed.offline import OfflineBackend
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.run import write_records
from ragstore.search import search
from tests.fix_storage import exhaustive_rerank

pytestmark = pytest.mark.usefixtures("each_storage")  # each test once per index storage


class ElsewhereBackend(OfflineBackend):
    """Same dimension, another backend name: SQL cannot embed for it."""

    @property
    def name(self) -> str:
        return "elsewhere"


def clustered(n, dim=16, seed=0):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(8, dim))
    return (centers[rng.integers(0, 8, n)] + 0.3 * rng.normal(size=(n, dim))).astype(np.float32)


@pytest.fixture
def docs(conn):
    fam = families.create_family(conn, "docs", OfflineBackend())
    vectors = clustered(400)
    records = [
        (
            str(i),
            ChunkRecord(
                chunk_id=f"c{i:04d}",
                package_path=f"pkg/{i % 5}",
                text=f"note {i} on topic {i % 9}",
                vector=[float(x) for x in vectors[i]],
            ),
        )
        for i in range(400)
    ]
    write_records(conn, fam, OfflineBackend(), records)
    conn.commit()
    return fam


def sql_search(conn, family, vector, k):
    return conn.execute("SELECT * FROM ragstore.search(%s, %s, %s)", (family, Vector(vector), k)).fetchall()


def test_sql_search_returns_the_library_hnsw_and_exact_results(conn, docs):
    exhaustive_rerank(conn, "docs")
    for seed in range(5):
        q = clustered(1, seed=50 + seed)[0]
        rows = sql_search(conn, "docs", q, 10)
        hits = search(conn, "docs", vector=q, k=10)
        exact = search(conn, "docs", vector=q, k=10, mode="exact")
        assert [r[0] for r in rows] == [h.chunk_id for h in hits] == [h.chunk_id for h in exact]
        assert [(r[1], r[3]) for r in rows] == [(h.package_path, h.text) for h in hits]
        assert all(math.isclose(r[2], h.score, abs_tol=1e-6) for r, h in zip(rows, exact, strict=True))


def test_sql_search_text_embeds_in_sql_like_the_library(conn):
    fam = families.create_family(conn, "notes", OfflineBackend())
    texts = [f"note {i} about {['keys', 'tokens', 'disks', 'queues'][i % 4]} rotation" for i in range(60)]
    records = [(str(i), ChunkRecord(chunk_id=f"n{i:03d}", package_path="p", text=t)) for i, t in enumerate(texts)]
    write_records(conn, fam, OfflineBackend(), records)
    conn.commit()
    rows = conn.execute("SELECT chunk_id, score, text FROM ragstore.search_text('notes', 'rotate disks', 5)").fetchall()
    hits = search(conn, "notes", "rotate disks", k=5, mode="hnsw")
    assert [r[0] for r in rows] == [h.chunk_id for h in hits] and len(rows) == 5
    assert all(math.isclose(r[1], h.score, abs_tol=1e-6) for r, h in zip(rows, hits, strict=True))


def test_sql_search_orders_ties_by_chunk_id_and_scores_a_zero_query_zero(conn, docs):
    rows = sql_search(conn, "docs", np.zeros(16, dtype=np.float32), 3)
    assert len(rows) == 3 and {r[2] for r in rows} == {0.0}
    keys = [(-r[2], r[0]) for r in sql_search(conn, "docs", clustered(1, seed=3)[0], 20)]
    assert keys == sorted(keys)


def test_sql_search_k_wider_than_ef_search_still_returns_k(conn, docs):
    assert len(sql_search(conn, "docs", clustered(1, seed=4)[0], 150)) == 150


def test_sql_search_k_at_the_documented_maximum_runs(conn, docs):
    """k = 1000 is hnsw.ef_search's upper bound: the function clamps the setting and answers."""
    rows = sql_search(conn, "docs", clustered(1, seed=5)[0], 1000)
    count = conn.execute("SELECT count(*) FROM ragstore.emb_docs").fetchone()[0]
    assert len(rows) == min(1000, count)


@pytest.mark.parametrize(
    ("statement", "args", "sqlstate", "message"),
    [
        ("SELECT * FROM ragstore.search(%s, %s, 5)", ("nope", Vector([1.0] * 16)), "42704", "no family named 'nope'"),
        ("SELECT * FROM ragstore.search(%s, %s, 5)", ("docs", Vector([1.0] * 17)), "22000", "17 dimensions"),
        ("SELECT * FROM ragstore.search(%s, %s, 0)", ("docs", Vector([1.0] * 16)), "22023", "from 1 to 1000"),
        ("SELECT * FROM ragstore.search(%s, %s, 1001)", ("docs", Vector([1.0] * 16)), "22023", "from 1 to 1000"),
        ("SELECT * FROM ragstore.search_text(%s, %s, 1001)", ("docs", "keys"), "22023", "from 1 to 1000"),
        (
            "SELECT * FROM ragstore.hybrid_search(%s, 'keys', %s, 1001)",
            ("docs", Vector([1.0] * 16)),
            "22023",
            "from 1 to 1000",
        ),
        ("SELECT * FROM ragstore.search_text(%s, %s, 5)", ("nope", "keys"), "42704", "no family named 'nope'"),
        ("SELECT * FROM ragstore.search_text(%s, %s, 5)", ("docs", "  "), "22023", "empty"),
    ],
)
def test_sql_functions_refuse_bad_input_with_a_clear_error(conn, docs, statement, args, sqlstate, message):
    with pytest.raises(psycopg.Error, match=message) as caught:
        conn.execute(statement, args)
    assert caught.value.sqlstate == sqlstate


def test_search_text_refuses_a_family_sql_cannot_embed_for(conn):
    families.create_family(conn, "remote", ElsewhereBackend())
    conn.commit()
    with pytest.raises(psycopg.errors.FeatureNotSupported, match=r"ragstore\.search\(family, vector, k\)"):
        conn.execute("SELECT * FROM ragstore.search_text('remote', 'keys', 5)")


def test_sql_search_settings_do_not_outlive_the_call(conn, docs):
    before = conn.execute("SHOW hnsw.ef_search").fetchone()
    sql_search(conn, "docs", clustered(1)[0], 300)
    assert conn.execute("SHOW hnsw.ef_search").fetchone() == before
