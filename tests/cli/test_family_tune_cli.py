"""`ragstore family tune` (the selection rule cross-validated, its choice stored only when it is not the default
and does not lose held out) and `family show`."""

import json

from click.testing import CliRunner

from ragstore import families
from ragstore.cli.main import cli
from ragstore.embed.offline import OfflineBackend
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.run import write_records
from ragstore.search.fusion import FusionSettings, settings_of, store_settings

WORDS = ["apple", "banana", "cherry", "grape", "melon", "kiwi", "lemon", "mango", "peach", "plum"]


def fruit_family(conn, tmp_path):
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
    return ["--queries", str(queries), "--qrels", str(qrels)]


def test_tune_reports_held_out_stores_the_choice_and_show_prints_it(dsn, conn, tmp_path):
    files = fruit_family(conn, tmp_path)
    runner = CliRunner()
    before = json.loads(runner.invoke(cli, ["--dsn", dsn, "family", "show", "docs", "--json"]).output)
    assert before["fusion"]["tuned"] is False and before["fusion"]["fusion"] == "cc"
    result = runner.invoke(cli, ["--dsn", dsn, "family", "tune", "docs", *files, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["queries"] == 10 and report["folds"] == 5 and report["min_gain_se"] == 1.0
    assert report["settings_tried"] == 22  # the default, rrf, cc × 3 normalisations × 7 alphas at 50 per leg
    assert 0.0 <= report["held_out_ndcg"] <= 1.0 and report["stored"] is (
        not report["kept_default"] and report["held_out_ndcg"] >= report["default_held_out_ndcg"]
    )
    assert report["default_held_out_ndcg"] == report["untuned_ndcg"]
    assert len(report["per_fold"]) == 5 and sum(f["queries"] for f in report["per_fold"]) == 10
    for fold in report["per_fold"]:
        assert fold["kept_default"] is (fold["chosen"] == FusionSettings().label)
        assert {"best_candidate", "train_gain", "train_gain_se", "held_out_ndcg", "default_held_out_ndcg"} <= set(fold)
    shown = runner.invoke(cli, ["--dsn", dsn, "family", "show", "docs"]).output
    assert "fusion:" in shown and ("tuned" in shown) is report["stored"]
    text = runner.invoke(cli, ["--dsn", dsn, "family", "tune", "docs", *files, "--dry-run", "--per-leg", "30"]).output
    assert (
        "44 settings" in text
        and "fold 5 (2 q.)" in text
        and "tuned, held out" in text
        and "not stored (--dry-run)" in text
    )
    reset = runner.invoke(cli, ["--dsn", dsn, "family", "tune", "docs", "--queries", "x", "--qrels", "y", "--reset"])
    assert reset.exit_code == 0 and "back to the default" in reset.output
    after = json.loads(runner.invoke(cli, ["--dsn", dsn, "family", "show", "docs", "--json"]).output)
    assert after["fusion"]["tuned"] is False


def test_when_the_rule_keeps_the_default_an_earlier_tuning_is_forgotten(dsn, conn, tmp_path):
    files = fruit_family(conn, tmp_path)
    store_settings(conn, "docs", FusionSettings(fusion="rrf"))
    result = CliRunner().invoke(cli, ["--dsn", dsn, "family", "tune", "docs", *files, "--min-gain-se", "1000"])
    assert result.exit_code == 0, result.output
    assert "chosen: the default" in result.output and "the family uses the default" in result.output
    assert settings_of(families.get_family(conn, "docs").options) == FusionSettings()
    assert "fusion" not in families.get_family(conn, "docs").options


def test_a_negative_margin_is_refused():
    args = ["family", "tune", "docs", "--queries", "q", "--qrels", "r", "--min-gain-se", "-1"]
    result = CliRunner().invoke(cli, ["--dsn", "postgresql:///nowhere", *args])
    assert result.exit_code == 2 and "--min-gain-se" in result.output and "not in the range" in result.output


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
