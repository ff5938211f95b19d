import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragstore.cli.main import cli

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample.jsonl"


def invoke(dsn, *args, input=None):
    return CliRunner().invoke(cli, ["--dsn", dsn, *args], input=input, catch_exceptions=False)


@pytest.mark.slow
def test_migrate_twice_says_nothing_to_do_and_status_is_current(empty_dsn):
    first = invoke(empty_dsn, "migrate")
    assert first.exit_code == 0 and "applied" in first.output
    second = invoke(empty_dsn, "migrate")
    assert second.exit_code == 0 and "nothing to do" in second.output
    status = invoke(empty_dsn, "migrate", "--status", "--json")
    data = json.loads(status.output)
    assert data["up_to_date"] is True and data["current"] == data["head"]


def test_migrate_sql_needs_no_database():
    result = CliRunner().invoke(cli, ["--dsn", "postgresql://nobody@127.0.0.1:1/none", "migrate", "--sql"])
    assert result.exit_code == 0 and "CREATE TABLE ragstore.chunks" in result.output


def test_family_create_list_show(dsn):
    assert invoke(dsn, "family", "create", "docs", "--backend", "offline").exit_code == 0
    listed = json.loads(invoke(dsn, "family", "list", "--json").output)
    assert [f["name"] for f in listed] == ["docs"] and listed[0]["dim"] == 16
    shown = json.loads(invoke(dsn, "family", "show", "docs", "--json").output)
    assert shown["rows"] == 0 and shown["hnsw_index"] == "ragstore.emb_docs_embedding_hnsw"
    text = invoke(dsn, "family", "show", "docs").output
    assert "rows:    0" in text and "vector_cosine_ops" in text


@pytest.mark.slow
def test_index_twice_reports_zero_inserted_then_all_unchanged(dsn, tmp_path):
    src = tmp_path / "c.jsonl"
    src.write_text(
        "".join(json.dumps({"chunk_id": f"c{i}", "package_path": "p", "text": f"t {i}"}) + "\n" for i in range(7))
    )
    invoke(dsn, "family", "create", "docs", "--backend", "offline")
    first = invoke(dsn, "index", "docs", str(src))
    assert first.exit_code == 0 and "7 inserted" in first.output
    second = invoke(dsn, "index", "docs", str(src))
    assert "0 inserted" in second.output and "7 unchanged" in second.output
    report = json.loads(invoke(dsn, "index", "docs", str(src), "--json").output)
    assert report["unchanged"] == 7 and report["inserted"] == 0


def test_index_reads_jsonl_from_stdin(dsn):
    invoke(dsn, "family", "create", "docs", "--backend", "offline")
    lines = "".join(
        json.dumps({"chunk_id": f"s{i}", "package_path": "stdin", "text": f"x{i}"}) + "\n" for i in range(3)
    )
    result = invoke(dsn, "index", "docs", "-", "--json", input=lines)
    assert json.loads(result.output)["inserted"] == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["family", "show", "nope"], "error: no family named 'nope'"),
        (["family", "create", "Bad-Name"], "error: invalid family name 'Bad-Name'"),
        (["index", "nope", str(SAMPLE)], "error: no family named 'nope'"),
        (["index", "docs", "/no/such/file.jsonl"], "error: /no/such/file.jsonl: no such file or folder"),
    ],
)
def test_errors_are_one_line_with_non_zero_exit(dsn, args, message):
    invoke(dsn, "family", "create", "docs", "--backend", "offline")
    result = CliRunner().invoke(cli, ["--dsn", dsn, *args])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message)
    assert "Traceback" not in result.output


def test_bad_line_names_file_and_line_and_nothing_is_written(dsn, tmp_path):
    src = tmp_path / "bad.jsonl"
    src.write_text('{"chunk_id": "a", "package_path": "p", "text": "ok"}\n{"chunk_id": "b", "package_path": "p"}\n')
    invoke(dsn, "family", "create", "docs", "--backend", "offline")
    result = CliRunner().invoke(cli, ["--dsn", dsn, "index", "docs", str(src)])
    assert result.exit_code == 1 and "bad.jsonl:2: text: Field required" in result.output
    shown = json.loads(invoke(dsn, "family", "show", "docs", "--json").output)
    assert shown["rows"] == 0


def test_unreachable_database_is_one_line_and_debug_shows_a_traceback():
    bad = "postgresql://me:hunter2@127.0.0.1:1/db"
    plain = subprocess.run(
        [sys.executable, "-m", "ragstore.cli", "--dsn", bad, "family", "list"], capture_output=True, text=True
    )
    assert plain.returncode == 1
    assert plain.stderr.startswith("error: cannot connect to") and "hunter2" not in plain.stderr
    assert "Traceback" not in plain.stderr and len(plain.stderr.strip().splitlines()) == 1
    debug = subprocess.run(
        [sys.executable, "-m", "ragstore.cli", "--debug", "--dsn", bad, "family", "list"],
        capture_output=True,
        text=True,
    )
    assert debug.returncode != 0 and "Traceback" in debug.stderr
