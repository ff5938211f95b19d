"""`ragstore search` and `ragstore check-recall`: table and JSON output, one-line errors, exit codes."""

import json

import pytest
from click.testing import CliRunner

import ragstore.search.recall as recall_module
from ragstore import families
from ragstore.cli.main import cli
from ragstore.embed.offline import OfflineBackend
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.run import write_records
from ragstore.search.recall import RecallReport

pytestmark = pytest.mark.usefixtures("each_storage")  # each test once per index storage


@pytest.fixture
def store(dsn, conn):
    fam = families.create_family(conn, "docs", OfflineBackend())
    records = [
        (
            str(i),
            ChunkRecord(
                chunk_id=f"c{i:04d}",
                package_path=f"pkg/{i % 4}",
                text=f"chunk number {i} about topic {i % 7}",
                metadata={"even": i % 2 == 0},
            ),
        )
        for i in range(400)
    ]
    write_records(conn, fam, OfflineBackend(), records)
    return dsn


def invoke(dsn, *args):
    return CliRunner().invoke(cli, ["--dsn", dsn, *args], catch_exceptions=False)


def test_search_json_lists_hits_with_citations(store):
    result = invoke(store, "search", "docs", "chunk number 12 about topic 5", "-k", "3", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["hits"][0]["chunk_id"] == "c0012" and len(data["hits"]) == 3
    assert data["hits"][0]["citation"] == "[pkg/0#c0012]" and data["hits"][0]["text"].startswith("chunk number 12")


def test_search_table_shows_rank_score_citation_and_text(store):
    result = invoke(store, "search", "docs", "chunk number 12 about topic 5", "-k", "2")
    assert result.exit_code == 0
    first, text = result.output.splitlines()[:2]
    assert first.split()[0] == "1" and "[pkg/0#c0012]" in first and "chunk number 12" in text


def test_search_filters_and_exact_options_reach_the_library(store):
    result = invoke(
        store, "search", "docs", "topic 3", "--package", "pkg/1", "--where", '{"even": false}', "--exact", "--json"
    )
    hits = json.loads(result.output)["hits"]
    assert hits and all(h["package_path"] == "pkg/1" and h["metadata"] == {"even": False} for h in hits)


def test_unknown_family_and_bad_options_are_one_line_errors(store):
    result = CliRunner().invoke(cli, ["--dsn", store, "search", "nope", "x"])
    assert result.exit_code == 1 and "no family named 'nope'" in result.output
    assert len(result.output.strip().splitlines()) == 1
    bad = CliRunner().invoke(cli, ["--dsn", store, "search", "docs", "x", "--where", "[1]"])
    assert bad.exit_code == 1 and "--where must be a JSON object" in bad.output
    zero = CliRunner().invoke(cli, ["--dsn", store, "search", "docs", "x", "-k", "0"])
    assert zero.exit_code == 1 and "k must be a positive integer" in zero.output


def test_check_recall_reports_and_fails_below_min_recall(store):
    result = invoke(store, "check-recall", "docs", "--samples", "20", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["queries"] == 20 and report["recall"] >= 0.9 and report["ef_search"] == 100
    assert report["hnsw_mean_ms"] > 0 and report["exact_timed"] == 20 and report["passed"] is None
    table = invoke(store, "check-recall", "docs", "--samples", "5", "--min-recall", "0.5")
    assert table.exit_code == 0 and "recall@10" in table.output and "PASS" in table.output


def test_check_recall_exits_3_below_min_recall(store, monkeypatch):
    def low(conn, family, **kw):
        return RecallReport("docs", 10, 5, 100, 0.5, 1.0, 2.0, 3.0, 4.0, 5, kw["min_recall"], False)

    monkeypatch.setattr(recall_module, "check_recall", low)  # what Store.check_recall calls
    failing = invoke(store, "check-recall", "docs", "--min-recall", "0.9")
    assert failing.exit_code == 3 and "recall@10  0.5000  FAIL (< 0.9)" in failing.output


def test_check_recall_plot_sweeps_ef_search_and_writes_a_png(store, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "recall.png"
    result = invoke(store, "check-recall", "docs", "--samples", "10", "--sweep", "10,40", "--plot", str(out), "--json")
    data = json.loads(result.output)
    assert [point["ef_search"] for point in data["sweep"]] == [10, 40]
    assert all(0.0 <= point["recall"] <= 1.0 for point in data["sweep"])
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("extra", [["--package", "nomatch/"], ["--where", '{"even": "maybe"}']])
def test_check_recall_with_no_evaluated_query_fails_and_says_why(store, extra):
    result = CliRunner().invoke(cli, ["--dsn", store, "check-recall", "docs", "--min-recall", "0.9", *extra])
    assert result.exit_code != 0, result.output
    assert "evaluated no query" in result.output and "PASS" not in result.output


def test_check_recall_on_an_empty_family_fails_and_says_why(store, conn):
    families.create_family(conn, "empty", OfflineBackend())
    result = CliRunner().invoke(cli, ["--dsn", store, "check-recall", "empty", "--min-recall", "0.5"])
    assert result.exit_code != 0 and "family 'empty' has no rows" in result.output


def test_mmr_on_an_offline_family_is_refused_with_a_reason(store):
    result = CliRunner().invoke(cli, ["--dsn", store, "search", "docs", "topic 3", "--rerank", "mmr"])
    assert result.exit_code == 1 and "fingerprints" in result.output
    assert len(result.output.strip().splitlines()) == 1
