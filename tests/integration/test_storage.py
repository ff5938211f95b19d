"""A family's index storage (vector, halfvec, bit): the index each builds, that every search mode reads it,
filtered searches that still return k, the SQL functions, and the same expression on the Python and SQL sides."""

import json
import warnings

import numpy as np
import pytest
from psycopg import sql

from ragstore import families
from ragstore.embed.external import ExternalBackend
from ragstore.errors import InvalidInput
from ragstore.families import storage as storages
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from ragstore.search import api, vector
from ragstore.search.request import Filter, make_filter
from tests.toolkit.storage import DIM, INDEX_DEFINITION, ROWS, STORAGES, clustered, write_chunks


@pytest.fixture
def matrix():
    return clustered(ROWS)


def make(conn, tmp_path, matrix, storage, name="ext", **extra):
    options = {"dimensions": DIM, **storages.storage_options(storage, extra.get("rerank_factor"))}
    families.create_family(conn, name, ExternalBackend("mine", DIM), options=options)
    index_sources(conn, name, open_sources([str(write_chunks(tmp_path / f"{name}.jsonl", matrix))]))
    conn.execute(sql.SQL("ANALYZE ragstore.{}").format(sql.Identifier(f"emb_{name}")))
    conn.commit()
    return families.get_family(conn, name)


def index_definition(conn, family):
    row = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", (family.hnsw_index,)).fetchone()
    return row[0] if row else None


def explain(conn, statement, params):
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")  # a small table: show that the index CAN serve the order
        rows = conn.execute("EXPLAIN " + statement, params).fetchall()
    return "\n".join(r[0] for r in rows)


def exact_top(matrix, q, k, keep=None):
    scores = matrix @ q
    order = [i for i in np.argsort(-scores, kind="stable") if keep is None or keep(i)]
    return [f"c{i:04d}" for i in order[:k]]


@pytest.mark.parametrize("storage", STORAGES)
def test_each_storage_builds_its_index_and_the_search_reads_it(conn, tmp_path, matrix, storage):
    family = make(conn, tmp_path, matrix, storage)
    assert family.storage == storage
    assert INDEX_DEFINITION[storage] in index_definition(conn, family)  # built after the bulk load, as create makes it
    flt = make_filter(None, None)
    statement = vector.hnsw_statement(family, flt, 10)
    params = {"q": family.query_param(matrix[0]), "ragstore_ef": "100", "ragstore_iterative": "off"}
    assert f"Index Scan using {family.hnsw_index}" in explain(conn, statement, params)
    hybrid_text, hybrid_params, *_ = api_hybrid_statement(conn, family, matrix[0])
    hybrid_params |= {"ragstore_ef": "100", "ragstore_iterative": "off"}
    assert f"Index Scan using {family.hnsw_index}" in explain(conn, hybrid_text, hybrid_params)


def api_hybrid_statement(conn, family, q):
    from ragstore.db.dialect import dialect_of
    from ragstore.search import hybrid
    from ragstore.search.fusion import settings_of

    return hybrid.prepare(
        dialect_of(conn), family, "copy files", q, k=10, settings=settings_of(family.options), weights=None,
        flt=Filter(), match="auto",
    )  # fmt: skip


@pytest.mark.parametrize("storage", STORAGES)
def test_every_mode_answers_k_exactly_ranked_hits_on_each_storage(conn, tmp_path, matrix, storage):
    make(conn, tmp_path, matrix, storage)
    q = matrix[5]
    for mode in ("hnsw", "exact"):
        hits = api.search(conn, "ext", vector=q, k=10, mode=mode)
        assert len(hits) == 10
        assert hits[0].chunk_id == "c0005"  # a stored vector finds itself first (Hamming 0 for bit)
        # Scores are exact cosines of the full vectors, best first: bit's candidates were re-ranked.
        ids = [int(h.chunk_id[1:]) for h in hits]
        assert [h.score for h in hits] == pytest.approx([float(matrix[i] @ q) for i in ids], abs=1e-3)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    truth = exact_top(matrix, q, 10)
    found = [h.chunk_id for h in api.search(conn, "ext", vector=q, k=10, mode="hnsw")]
    assert len(set(found) & set(truth)) >= 5  # a loose floor: recall is measured by check-recall, not here
    from ragstore.search.hybrid import hybrid_search

    hybrid = hybrid_search(conn, families.get_family(conn, "ext"), "copy files", q, k=10)
    assert len(hybrid) == 10 and "c0005" in [h.chunk_id for h in hybrid]
    mmr = api.search(conn, "ext", vector=q, k=5, mode="hnsw", rerank="mmr", fetch_k=30, mmr_lambda=0.7)
    assert len(mmr) == 5 and mmr[0].chunk_id == "c0005" and all(h.vector is not None for h in mmr)


@pytest.mark.parametrize("storage", STORAGES)
def test_filtered_searches_return_k_hits_passing_the_filter_on_each_storage(
    conn, tmp_path, matrix, storage, monkeypatch
):
    family = make(conn, tmp_path, matrix, storage)
    q = matrix[3]
    # the exact plan (30 rows of small/) and, with the budget shrunk, the iterative scan of the index
    for budget in (vector.FILTER_EXACT_MAX_ROWS, 5):
        monkeypatch.setattr(vector, "FILTER_EXACT_MAX_ROWS", budget)
        monkeypatch.setattr(vector, "FILTER_EXACT_MAX_ROWS_WIDE", budget)
        small = api.search(conn, "ext", vector=q, k=10, mode="hnsw", package="small/", caches=None)
        assert len(small) == 10 and all(h.package_path == "small/" for h in small)
        assert small[0].chunk_id == "c0003"
        tagged = api.search(conn, "ext", vector=q, k=10, mode="hnsw", metadata={"tag": 3})
        assert len(tagged) == 10 and all(h.metadata["tag"] == 3 for h in tagged)
        assert tagged[0].chunk_id == "c0003"
    assert vector.plan_for(conn, family, make_filter(None, {"tag": 3})) != vector.PLAN_HNSW


@pytest.mark.parametrize("storage", STORAGES)
def test_the_sql_functions_read_each_storage(conn, tmp_path, matrix, storage):
    make(conn, tmp_path, matrix, storage)
    q = families.get_family(conn, "ext").query_param(matrix[9])
    rows = conn.execute("SELECT chunk_id, score FROM ragstore.search('ext', %s, 7)", (q,)).fetchall()
    assert len(rows) == 7 and rows[0][0] == "c0009"
    assert [r[1] for r in rows] == sorted((r[1] for r in rows), reverse=True)
    hybrid = conn.execute("SELECT chunk_id FROM ragstore.hybrid_search('ext', 'copy files', %s, 5)", (q,)).fetchall()
    assert len(hybrid) == 5 and "c0009" in [r[0] for r in hybrid]


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("factor", [None, 3, 200])
def test_sql_and_python_write_the_same_order_and_candidates(conn, storage, factor):
    options = {"dimensions": DIM, "storage": storage}
    if factor is not None:
        options["rerank_factor"] = factor
    family = families.Family("ext", "external", "mine", DIM, "vector", "emb_ext", "ready", options)
    row = conn.execute(
        "SELECT ragstore.family_index_order(f, '%%(q)s'), ragstore.family_index_candidates(f, 10) "
        "FROM (SELECT ROW('ext', 'external', 'mine', %s::int, 'vector', 'emb_ext', 'ready', %s::jsonb, now(), now())"
        "::ragstore.families AS f) AS x(f)",
        (DIM, json.dumps(options)),
    ).fetchone()
    assert row[0] == storages.order_expression(storage, "vector", DIM, "e.embedding", "%(q)s")
    assert row[1] == family.candidates(10)


def test_bad_storage_and_rerank_factor_are_refused_in_one_line(conn):
    backend = ExternalBackend("mine", DIM)
    with pytest.raises(InvalidInput, match="invalid storage 'int8'"):
        families.create_family(conn, "bad", backend, options={"dimensions": DIM, "storage": "int8"})
    with pytest.raises(InvalidInput, match="rerank factor"):
        families.create_family(conn, "bad", backend, options={"dimensions": DIM, "storage": "bit", "rerank_factor": 0})
    with pytest.raises(InvalidInput, match="bit storage only"):
        storages.storage_options("halfvec", 4)
    assert families.list_families(conn) == []


def run_cli(dsn, *args):
    from click.testing import CliRunner

    from ragstore.cli.main import cli

    return CliRunner().invoke(cli, ["--dsn", dsn, *args])


@pytest.mark.parametrize(("source", "target"), [("vector", "halfvec"), ("halfvec", "bit"), ("bit", "vector")])
def test_migrate_storage_swaps_the_index_and_keeps_chunks_and_results(dsn, conn, tmp_path, matrix, source, target):
    family = make(conn, tmp_path, matrix, source)
    chunks_before = conn.execute("SELECT count(*), sum(hashtext(chunk_id)) FROM ragstore.chunks").fetchone()
    vectors_before = conn.execute(
        "SELECT md5(string_agg(embedding::text, ',' ORDER BY chunk_id)) FROM ragstore.emb_ext"
    ).fetchone()
    exact_before = [h.chunk_id for h in api.search(conn, "ext", vector=matrix[11], k=10, mode="exact")]
    conn.commit()
    done = run_cli(dsn, "family", "migrate", "ext", "--storage", target, "--json")
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert (report["source"], report["target"], report["rebuilt"]) == (source, target, True)
    now = families.get_family(conn, "ext")
    assert now.storage == target and now.table == family.table
    assert INDEX_DEFINITION[target] in index_definition(conn, now)
    # one HNSW index on the table, the family's own name; no shadow or previous left
    names = [r[0] for r in conn.execute(
        "SELECT indexname FROM pg_indexes WHERE tablename = 'emb_ext' AND indexdef LIKE '%%USING hnsw%%'"
    ).fetchall()]  # fmt: skip
    assert names == [family.hnsw_index]
    assert conn.execute("SELECT count(*), sum(hashtext(chunk_id)) FROM ragstore.chunks").fetchone() == chunks_before
    assert (
        conn.execute("SELECT md5(string_agg(embedding::text, ',' ORDER BY chunk_id)) FROM ragstore.emb_ext").fetchone()
        == vectors_before
    )
    assert [h.chunk_id for h in api.search(conn, "ext", vector=matrix[11], k=10, mode="exact")] == exact_before
    hits = api.search(conn, "ext", vector=matrix[11], k=10, mode="hnsw")
    assert len(hits) == 10 and hits[0].chunk_id == "c0011"
    statement = vector.hnsw_statement(now, make_filter(None, None), 10)
    params = {"q": now.query_param(matrix[0]), "ragstore_ef": "100", "ragstore_iterative": "off"}
    assert f"Index Scan using {now.hnsw_index}" in explain(conn, statement, params)


def test_migrate_to_the_same_storage_records_the_factor_only(dsn, conn, tmp_path, matrix):
    make(conn, tmp_path, matrix, "bit", rerank_factor=4)
    oid = conn.execute("SELECT 'ragstore.emb_ext_embedding_hnsw'::regclass::oid").fetchone()[0]
    conn.commit()
    done = run_cli(dsn, "family", "migrate", "ext", "--storage", "bit", "--rerank-factor", "20")
    assert done.exit_code == 0 and "no index rebuilt" in done.output
    assert families.get_family(conn, "ext").rerank_factor == 20
    assert conn.execute("SELECT 'ragstore.emb_ext_embedding_hnsw'::regclass::oid").fetchone()[0] == oid
    conn.commit()
    kept = run_cli(dsn, "family", "migrate", "ext", "--storage", "bit")
    assert kept.exit_code == 0 and families.get_family(conn, "ext").rerank_factor == 20
    bad = run_cli(dsn, "family", "migrate", "ext", "--storage", "halfvec", "--backend", "offline")
    assert bad.exit_code == 1 and "--storage takes no --backend" in bad.output


def test_create_on_the_command_line_records_the_storage_and_refuses_a_factor_without_bit(dsn, conn):
    made = run_cli(dsn, "family", "create", "ext", "--backend", "external", "--model", "mine",
                   "--dimensions", "32", "--storage", "halfvec")  # fmt: skip
    assert made.exit_code == 0 and "halfvec index" in made.output, made.output
    assert families.get_family(conn, "ext").storage == "halfvec"
    refused = run_cli(dsn, "family", "create", "two", "--backend", "external", "--model", "mine",
                      "--dimensions", "32", "--rerank-factor", "4")  # fmt: skip
    assert refused.exit_code == 1 and "bit storage only" in refused.output
    assert [f.name for f in families.list_families(conn)] == ["ext"]


def test_a_model_migration_keeps_the_storage(conn, tmp_path):
    from tests.toolkit.family_migrate import HashBackend, write_jsonl

    families.create_family(conn, "docs", HashBackend(), options={"storage": "bit", "rerank_factor": 5})
    index_sources(conn, "docs", open_sources([str(write_jsonl(tmp_path / "c.jsonl", 20))]), backend=HashBackend())
    from ragstore.embed.offline import OfflineBackend
    from ragstore.families.migrate import migrate_family

    migrate_family(conn, "docs", OfflineBackend())
    now = families.get_family(conn, "docs")
    assert (now.backend, now.storage, now.rerank_factor) == ("offline", "bit", 5)
    assert "bit_hamming_ops" in index_definition(conn, now)


def test_the_app_bulk_loads_a_bit_family_through_the_definer_but_may_not_change_its_storage(
    dsn, conn, tmp_path, matrix, monkeypatch
):
    from psycopg.conninfo import make_conninfo

    from ragstore.db.connection import connect
    from ragstore.families.storage_migrate import migrate_storage
    from ragstore.ingest import writer
    from tests.toolkit.roles import _login_role

    monkeypatch.setattr(writer, "BULK_THRESHOLD", 10)  # the bulk path: the index dropped, then rebuilt by the app

    families.create_family(conn, "ext", ExternalBackend("mine", DIM), options={"dimensions": DIM, "storage": "bit"})
    conn.commit()
    path = write_chunks(tmp_path / "c.jsonl", matrix)
    for name in _login_role(dsn, "ragstore_app"):
        with connect(make_conninfo(dsn, user=name)) as app:
            assert index_sources(app, "ext", open_sources([str(path)])).inserted == ROWS
            with pytest.raises(InvalidInput, match=r"only the owner of ragstore\.emb_ext"):
                migrate_storage(app, "ext", "vector")
            hits = api.search(app, "ext", vector=matrix[2], k=10, mode="hnsw")
            assert len(hits) == 10 and hits[0].chunk_id == "c0002"
    family = families.get_family(conn, "ext")
    assert family.storage == "bit" and INDEX_DEFINITION["bit"] in index_definition(conn, family)


def test_create_with_bit_storage_prints_the_measured_caveat(dsn, conn):
    made = run_cli(dsn, "family", "create", "ext", "--backend", "external", "--model", "mine",
                   "--dimensions", "32", "--storage", "bit", "--rerank-factor", "8")  # fmt: skip
    assert made.exit_code == 0, made.output
    assert "note: bit storage measured recall@10 0.34 on clustered synthetic" in made.output
    assert "not measured for mine (32-d)" in made.output and "ragstore check-recall" in made.output
    family = families.get_family(conn, "ext")
    assert (family.storage, family.rerank_factor) == ("bit", 8)
    half = run_cli(dsn, "family", "create", "half", "--backend", "external", "--model", "mine",
                   "--dimensions", "32", "--storage", "halfvec")  # fmt: skip
    assert half.exit_code == 0 and "note:" not in half.output  # halfvec measured over 0.95 everywhere


def test_the_store_warns_the_same_caveat_and_the_cli_prints_it_once(dsn):
    from ragstore import Store
    from ragstore.errors import StorageRecallWarning

    backend = ExternalBackend("mine", DIM)
    with Store(dsn) as store:
        with pytest.warns(StorageRecallWarning) as caught:
            store.create_family("ext", backend, options={"dimensions": DIM}, storage="bit")
        [message] = [str(w.message) for w in caught if w.category is StorageRecallWarning]
        assert message == f"family ext: {storages.measured_caveat('bit', 'mine', DIM)}"
        with warnings.catch_warnings():
            warnings.simplefilter("error", StorageRecallWarning)
            assert (
                store.create_family("half", backend, options={"dimensions": DIM}, storage="halfvec").storage
                == "halfvec"
            )
    made = run_cli(dsn, "family", "create", "cli", "--backend", "external", "--model", "mine",
                   "--dimensions", "32", "--storage", "bit")  # fmt: skip
    assert made.exit_code == 0, made.output
    assert made.output.count("bit storage measured recall@10") == 1, made.output
    assert "StorageRecallWarning" not in made.output


def test_the_caveat_follows_the_benchmark_table():
    assert storages.measured_caveat("vector", "all-MiniLM-L6-v2", 384) is None
    assert storages.measured_caveat("halfvec", "text-embedding-3-small", 1536) is None
    halfvec = [m.recall for m in storages.MEASURED if m.storage == "halfvec"]
    assert halfvec and min(halfvec) >= storages.MEASURED_FLOOR
    minilm = storages.measured_caveat("bit", "all-MiniLM-L6-v2", 384)
    assert minilm is not None and "this model (all-MiniLM-L6-v2) measured well" in minilm
    other = storages.measured_caveat("bit", "all-MiniLM-L6-v2", 768)  # the same name, another dimension
    assert other is not None and "not measured for all-MiniLM-L6-v2 (768-d)" in other


@pytest.mark.parametrize("storage", STORAGES)
def test_check_recall_measures_the_storage_as_configured_and_family_show_reports_it(
    dsn, conn, tmp_path, matrix, storage
):
    from ragstore.search.recall import check_recall

    make(conn, tmp_path, matrix, storage, **({"rerank_factor": 1} if storage == "bit" else {}))
    report = check_recall(conn, "ext", k=10, samples=40)
    assert (report.storage, report.recorded) == (storage, True)
    assert report.rerank_factor == (1 if storage == "bit" else None)
    recorded = families.get_family(conn, "ext").options["recall"]
    assert recorded["recall"] == pytest.approx(report.recall, abs=1e-4) and recorded["storage"] == storage
    assert (recorded["k"], recorded["queries"], recorded["filtered"]) == (10, 40, False)
    conn.commit()
    shown = run_cli(dsn, "family", "show", "ext")
    assert shown.exit_code == 0 and f"recall:  {report.recall:.4f} @10, ef_search 100, 40 sampled" in shown.output
    assert json.loads(run_cli(dsn, "family", "show", "ext", "--json").output)["recall"]["recall"] == recorded["recall"]
    if storage == "bit":
        # bit with a rerank factor of 1 reads only k candidates by Hamming distance: the check sees the
        # storage's loss, which a wider re-rank (the default) wins back.
        wider = check_recall(conn, "ext", k=10, samples=40)  # the same queries: the same figure
        assert wider.recall == report.recall
        conn.commit()
        assert run_cli(dsn, "family", "migrate", "ext", "--storage", "bit", "--rerank-factor", "20").exit_code == 0
        assert "recall" not in families.get_family(conn, "ext").options  # it measured another factor
        assert check_recall(conn, "ext", k=10, samples=40).recall > report.recall
    else:
        conn.commit()
        assert run_cli(dsn, "family", "migrate", "ext", "--storage", "bit").exit_code == 0
        assert "recall" not in families.get_family(conn, "ext").options  # it measured the old storage
        conn.commit()
        assert "recall:  not measured in this storage" in run_cli(dsn, "family", "show", "ext").output


def test_check_recall_through_the_cli_names_the_storage_and_a_reader_records_nothing(dsn, conn, tmp_path, matrix):
    from psycopg.conninfo import make_conninfo

    from ragstore.db.connection import connect
    from ragstore.search.recall import check_recall
    from tests.toolkit.roles import _login_role

    make(conn, tmp_path, matrix, "halfvec")
    conn.commit()
    done = run_cli(dsn, "check-recall", "ext", "--samples", "30")
    assert done.exit_code == 0, done.output
    assert "halfvec storage" in done.output and "recorded on the family" in done.output
    before = families.get_family(conn, "ext").options["recall"]
    for name in _login_role(dsn, "ragstore_reader"):
        with connect(make_conninfo(dsn, user=name)) as reader:
            report = check_recall(reader, "ext", k=5, samples=20)
            assert report.recorded is False and report.storage == "halfvec"
    assert families.get_family(conn, "ext").options["recall"] == before  # the reader's figure was not written
