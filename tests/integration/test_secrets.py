"""Secrets: API keys and DSN passwords never reach output, JSON or error messages."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from psycopg.conninfo import make_conninfo

from ragstore.cli.main import cli
from ragstore.db.connection import mask_dsn
from tests.openai_stub import Reply, StubServer

KEY = "sk-test-VERY-SECRET-0123456789"
PASSWORD = "pa:ss@w0rd'secret"


@pytest.mark.parametrize(
    "bad_dsn",
    [
        "postgresql://alice:hunter2secret@127.0.0.1:1/ragstore?connect_timeout=2",
        "host=127.0.0.1 port=1 user=alice password=hunter2secret dbname=ragstore connect_timeout=2",
        "host=127.0.0.1 port=1 user=alice password='hunter2secret' dbname=ragstore connect_timeout=2",
    ],
)
@pytest.mark.parametrize("args", [["family", "list"], ["migrate", "--status"], ["index", "docs", "-"]])
def test_dsn_password_is_masked_in_cli_errors(bad_dsn: str, args: list[str]) -> None:
    result = CliRunner().invoke(cli, ["--dsn", bad_dsn, *args], input="")
    assert result.exit_code == 1
    assert result.output.startswith("error: cannot connect to ") and "***" in result.output
    assert "hunter2secret" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_mask_dsn_covers_uri_keyword_and_quoted_forms() -> None:
    for text in (
        "postgresql://u:s3cr3t@h/db",
        "postgres://u:s3cr3t@h:5432/db?sslmode=require",
        "user=u password=s3cr3t host=h",
        "user=u PASSWORD = 's3cr3t' host=h",
        "could not connect: postgresql://u:s3cr3t@h/db: refused",
    ):
        assert "s3cr3t" not in mask_dsn(text), text


def test_wrong_password_for_a_real_server_is_masked(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("CREATE ROLE rs_secret_user LOGIN PASSWORD 'right-one'")
    try:
        target = make_conninfo(dsn, user="rs_no_such_user", password=PASSWORD)
        result = CliRunner().invoke(cli, ["--dsn", target, "family", "list"])
        assert result.exit_code == 1 and "error: " in result.output
        assert PASSWORD not in result.output and "w0rd" not in result.output
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute("DROP ROLE rs_secret_user")


def test_api_key_never_in_output_json_options_errors_or_logs(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("RS_TEST_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    runner = CliRunner()
    with StubServer() as stub:
        created = runner.invoke(
            cli,
            [
                "--dsn",
                dsn,
                "family",
                "create",
                "remote",
                "--backend",
                "openai",
                "--model",
                "stub-model",
                "--base-url",
                stub.url,
                "--api-key-env",
                "RS_TEST_KEY",
                "--json",
            ],
            catch_exceptions=False,
        )
        assert created.exit_code == 0, created.output
        assert json.loads(created.output)["options"]["api_key_env"] == "RS_TEST_KEY"
        # The key reached the provider (so the test is meaningful) ...
        assert any(KEY in str(r.headers) for r in stub.requests)
        src = tmp_path / "c.jsonl"
        src.write_text(json.dumps({"chunk_id": "a", "package_path": "p", "text": "hello"}) + "\n")
        listed = runner.invoke(cli, ["--dsn", dsn, "family", "show", "remote", "--json"])
        # ... and a provider that refuses it, echoing the key back, still never makes us print it.
        stub.queue(Reply(status=401, json_body={"error": {"message": f"Incorrect API key provided: {KEY}"}}))
        failed = runner.invoke(cli, ["--dsn", dsn, "index", "remote", str(src)])
        indexed = runner.invoke(cli, ["--dsn", dsn, "index", "remote", str(src), "--json"])
    assert failed.exit_code == 1 and failed.output.startswith("error: "), failed.output
    assert indexed.exit_code == 0, indexed.output
    with psycopg.connect(dsn) as conn:
        stored = conn.execute("SELECT options::text FROM ragstore.families").fetchall()
    for text in (created.output, listed.output, failed.output, indexed.output, repr(stored), caplog.text):
        assert KEY not in text and KEY[8:] not in text
