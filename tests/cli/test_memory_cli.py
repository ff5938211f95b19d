"""`ragstore memory add|import|compose|recall|forget`: parse, call one library function, print one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ragstore.cli.main import cli as root


def run(dsn: str, *args: str) -> Result:
    return CliRunner().invoke(root, ["--dsn", dsn, "memory", *args], catch_exceptions=False)


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    path = tmp_path / "ana.toml"
    path.write_text('agent = "ana"\nstores = ["semantic", "episodic"]\n')
    return path


def test_add_then_compose_json_and_markdown(dsn: str, profile: Path) -> None:
    added = run(dsn, "add", "--agent", "ana", "--store", "semantic", "--content", "Deploys need two approvals",
                "--confidence", "0.9", "--tags", "ops, deploy", "--at", "2026-05-01T10:00:00Z",
                "--id", "k1")  # fmt: skip
    assert added.exit_code == 0 and added.stdout == "added ana/semantic k1\n"
    assert run(dsn, "add", "--agent", "ana", "--store", "semantic", "--content", "Deploys need two approvals",
               "--confidence", "0.9", "--tags", "ops,deploy", "--at", "2026-05-01T10:00:00Z", "--id", "k1",
               ).stdout == "already stored ana/semantic k1\n"  # fmt: skip
    composed = run(dsn, "compose", "--profile", str(profile), "--now", "2026-06-01T00:00:00Z", "--json")
    data = json.loads(composed.stdout)
    assert data["stores"]["semantic"][0]["tags"] == ["ops", "deploy"] and data["stores"]["episodic"] == []
    again = run(dsn, "compose", "--profile", str(profile), "--now", "2026-06-01T00:00:00Z", "--format", "json")
    assert again.stdout == composed.stdout
    markdown = run(dsn, "compose", "--profile", str(profile), "--now", "2026-06-01T00:00:00Z", "--task-hint", "nope")
    assert "### semantic (0)" in markdown.stdout


def test_import_recall_and_forget(dsn: str, profile: Path, tmp_path: Path) -> None:
    lines = [
        {"id": "x1", "agent": "ana", "store": "episodic", "at": "2026-05-01T00:00:00Z", "content": "met the auditor"},
        {"id": "x2", "agent": "ana", "store": "semantic", "at": "2026-05-02T00:00:00Z", "content": "audit is in May"},
    ]
    jsonl = tmp_path / "m.jsonl"
    jsonl.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert run(dsn, "import", str(jsonl)).stdout == f"{jsonl}: 2 added, 0 already stored\n"
    recalled = run(dsn, "recall", "--profile", str(profile), "audit May", "-k", "1", "--json")
    assert [h["record"]["id"] for h in json.loads(recalled.stdout)["hits"]] == ["x2"]
    forgot = run(dsn, "forget", "--agent", "ana", "--id", "x1", "--reason", "erasure request", "--json")
    assert json.loads(forgot.stdout)["record_id"] == "x1"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["add", "--agent", "ana", "--store", "semantic", "--content", " "], "field 'content'"),
        (["add", "--agent", "ana", "--store", "semantic", "--content", "x", "--salience", "2"], "field 'salience'"),
        (["forget", "--agent", "ana", "--id", "nope", "--reason", "r"], "has no memory record 'nope'"),
        (["compose", "--profile", "missing.json"], "agent profile not found"),
        (["compose", "--profile", "missing.json", "--now", "2026-01-01"], "needs a timezone"),
    ],
)
def test_errors_are_one_line(dsn: str, args: list[str], message: str) -> None:
    result = run(dsn, *args)
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and message in result.stderr and result.stderr.startswith("error: ")


def test_import_error_names_file_line_and_field(dsn: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"agent": "ana", "store": "nowhere", "at": "2026-01-01T00:00:00Z", "content": "x"}\n')
    result = run(dsn, "import", str(bad))
    assert result.exit_code == 1 and f"{bad}:1: field 'store'" in result.stderr
