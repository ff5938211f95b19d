"""`ragstore family tune` (cross-validated, stored only when it does not lose held out) and `family show`."""

import json

from click.testing import CliRunner

from ragstore import families
from ragstore.cli.main import cli
from ragstore.embed.offline import OfflineBackend
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.writer import write_records

WORDS = ["apple", "banana", "cherry", "grape", "melon", "kiwi", "lemon", "mango", "peach", "plum"]


def test_tune_reports_held_out_stores_the_choice_and_show_prints_it(dsn, conn, tmp_path):
    fam = families.create_family(conn, "docs", OfflineBackend())
    records = [
        (str(i), ChunkRecord(chunk_id=f"c{i}", package_path="p", text=f"{w} {WORDS[(i + 3) % 10]} note {i}"))
        for i, w in enumerate(WORDS)
    ]
    write_records(conn, fam, OfflineBackend(), records)
    queries = tmp_path / "q.jsonl"
    queries.write_text("".join(json.dumps({"query_id": f"q{i}", "text": w}) + "\n" for i, w in enumerate(WORDS)))
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("".join(f"q{i}\tc{i}\t2\n" for i in range(10)))
    runner = CliRunner()
    before = json.loads(runner.invoke(cli, ["--dsn", dsn, "family", "show", "docs", "--json"]).output)
    assert before["fusion"]["tuned"] is False and before["fusion"]["fusion"] == "cc"
    result = runner.invoke(
        cli, ["--dsn", dsn, "family", "tune", "docs", "--queries", str(queries), "--qrels", str(qrels), "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["queries"] == 10 and report["folds"] == 5
    assert 0.0 <= report["held_out_ndcg"] <= 1.0 and report["stored"] is (
        report["held_out_ndcg"] >= report["untuned_ndcg"]
    )
    shown = runner.invoke(cli, ["--dsn", dsn, "family", "show", "docs"]).output
    assert "fusion:" in shown and ("tuned" in shown) is report["stored"]
    reset = runner.invoke(cli, ["--dsn", dsn, "family", "tune", "docs", "--queries", "x", "--qrels", "y", "--reset"])
    assert reset.exit_code == 0 and "back to the default" in reset.output
    after = json.loads(runner.invoke(cli, ["--dsn", dsn, "family", "show", "docs", "--json"]).output)
    assert after["fusion"]["tuned"] is False


def test_tune_with_too_few_queries_is_a_one_line_error(dsn, conn, tmp_path):
    families.create_family(conn, "docs", OfflineBackend())
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"query_id": "q0", "text": "apple"}) + "\n")
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("q0\tc0\t2\n")
    result = CliRunner().invoke(
        cli, ["--dsn", dsn, "family", "tune", "docs", "--queries", str(queries), "--qrels", str(qrels)]
    )
    assert result.exit_code == 1 and "at least 5 queries" in result.output
