"""`ragstore cluster` and `migrate --sql --citus` without a cluster running (the cluster itself is tested
in tests/citus)."""

import json

from click.testing import CliRunner

from ragstore.cli.main import cli


def test_migrate_sql_citus_appends_the_layout_statements() -> None:
    plain = CliRunner().invoke(cli, ["migrate", "--sql"])
    citus = CliRunner().invoke(cli, ["migrate", "--sql", "--citus"])
    assert plain.exit_code == citus.exit_code == 0
    assert "create_distributed_table" not in plain.output
    assert citus.output.startswith(plain.output)
    tail = citus.output[len(plain.output) :]
    assert "SELECT create_reference_table('ragstore.families');" in tail
    assert "SELECT create_distributed_table('ragstore.chunks', 'chunk_id', colocate_with => 'default');" in tail
    assert "colocate_with => 'ragstore.chunks'" in tail


def test_cluster_status_without_a_cluster_says_how_to_start_one(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("RAGSTORE_HOME", str(tmp_path))
    result = CliRunner().invoke(cli, ["cluster", "status"])
    assert result.exit_code == 0
    assert "ragstore cluster start --workers 2" in result.output
    data = json.loads(CliRunner().invoke(cli, ["cluster", "status", "--json"]).output)
    assert data["created"] is False and data["running"] is False and data["nodes"] == []


def test_cluster_start_refuses_a_bad_worker_count_in_one_line(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("RAGSTORE_HOME", str(tmp_path))
    result = CliRunner().invoke(cli, ["cluster", "start", "--workers", "0"])
    assert result.exit_code != 0
    assert "--workers" in result.output and "Traceback" not in result.output
