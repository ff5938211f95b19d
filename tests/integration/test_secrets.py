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


# -- A provider URL with a password, a provider echoing the request, a key with a line break ----------
URL_PASSWORD = "Xq7-zW9!vK"
ECHO_KEY = "sk-Zq9vXw2LmT7pQ4rN8bK1yH6dF3gJ5cV0aE-uR+s/t=iO"


def _pieces(secret: str) -> list[str]:
    return [secret[i : i + 4] for i in range(len(secret) - 3)]


def _leaks(text: str, secret: str) -> list[str]:
    return [piece for piece in _pieces(secret) if piece.lower() in text.lower()]


def _echo_everything(headers: dict[str, str], raw: bytes) -> bytes:
    return json.dumps({"error": {"message": f"bad request {headers} {raw.decode()}"}}).encode()


def test_a_url_password_is_never_printed_by_family_commands_or_errors(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    caplog.set_level(logging.DEBUG)
    runner = CliRunner()
    src = tmp_path / "c.jsonl"
    src.write_text(json.dumps({"chunk_id": "a", "package_path": "p", "text": "hello"}) + "\n")
    outputs = []
    with StubServer() as stub:
        url = stub.url.replace("http://", f"http://alice:{URL_PASSWORD}@")
        create = ["family", "create", "remote", "--backend", "openai", "--model", "m", "--base-url", url]
        for args in (
            [*create, "--json"],
            ["family", "show", "remote"],
            ["family", "show", "remote", "--json"],
            ["family", "list"],
            ["family", "list", "--json"],
        ):
            result = runner.invoke(cli, ["--dsn", dsn, *args])
            assert result.exit_code == 0, result.output
            outputs.append(result.output)
        stub.queue(Reply(status=403, echo=_echo_everything))  # not retried: keeps the test quick
        failed = runner.invoke(cli, ["--dsn", dsn, "index", "remote", str(src)])
        assert failed.exit_code == 1 and failed.output.startswith("error: "), failed.output
        outputs.append(failed.output)
        # The password did reach the provider, as Basic auth (the only place it is needed).
        assert stub.requests[0].headers["authorization"].startswith("Basic ")
    assert '"base_url": "http://alice:***@127.0.0.1' in outputs[0]
    for text in (*outputs, caplog.text):
        assert URL_PASSWORD not in text and not _leaks(text, URL_PASSWORD), text


def test_a_provider_echoing_the_request_leaks_no_piece_of_the_key_through_the_cli(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RS_ECHO_KEY", ECHO_KEY)
    runner = CliRunner()
    src = tmp_path / "c.jsonl"
    src.write_text(json.dumps({"chunk_id": "a", "package_path": "p", "text": "hello"}) + "\n")
    with StubServer() as stub:
        created = runner.invoke(
            cli,
            ["--dsn", dsn, "family", "create", "remote", "--backend", "openai", "--model", "m"]
            + ["--base-url", stub.url, "--api-key-env", "RS_ECHO_KEY"],
        )
        assert created.exit_code == 0, created.output
        results = []
        stub.queue(Reply(status=401, echo=_echo_everything))
        results.append(runner.invoke(cli, ["--dsn", dsn, "index", "remote", str(src), "--json"]))
        stub.queue(Reply(status=400, echo=lambda h, b: f"oops\n{h}".encode()))
        results.append(runner.invoke(cli, ["--dsn", dsn, "search", "remote", "hello", "--json"]))
        stub.queue(Reply(status=200, echo=lambda h, b: f"<html>{h['authorization']}</html>".encode()))
        results.append(runner.invoke(cli, ["--dsn", dsn, "index", "remote", str(src)]))
        assert any(ECHO_KEY in str(r.headers) for r in stub.requests)
    for result in results:
        assert result.exit_code == 1, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), result.output
        assert not _leaks(result.output, ECHO_KEY), result.output


def test_a_key_with_a_line_break_is_refused_in_one_line_without_printing_it(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-Qz7wXv9k\nJ4pM2Tn8Rb6Hd"
    monkeypatch.setenv("RS_NL_KEY", key)
    with StubServer() as stub:
        result = CliRunner().invoke(
            cli,
            ["--dsn", dsn, "family", "create", "remote", "--backend", "openai", "--model", "m"]
            + ["--base-url", stub.url, "--api-key-env", "RS_NL_KEY"],
        )
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "RS_NL_KEY holds a line break" in lines[0]
    assert not _leaks(result.output, key.replace("\n", ""))
