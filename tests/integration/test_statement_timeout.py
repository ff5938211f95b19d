"""``RAGSTORE_STATEMENT_TIMEOUT``: checked before use, never fails ragstore's own connection set-up.

A malformed or out-of-range value is refused with a message naming the variable; a tiny one (1ms) lets
the connection open and cancels the caller's statements with a message that names it.
"""

from __future__ import annotations

import psycopg
import pytest
from click.testing import CliRunner

from ragstore.cli.main import cli
from ragstore.db.connection import connect, db_errors
from ragstore.errors import InvalidInput, Timeout


def test_a_tiny_timeout_lets_the_connection_open_and_names_itself_when_it_cancels(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGSTORE_STATEMENT_TIMEOUT", "1ms")
    for _ in range(30):  # each connection pays the type look-ups on a cold catalog cache
        connect(dsn).close()
    conn = connect(dsn)
    try:
        with pytest.raises(Timeout, match=r"statement cancelled \(RAGSTORE_STATEMENT_TIMEOUT=1ms\)"):
            with db_errors():
                conn.execute("SELECT pg_sleep(0.2)")
    finally:
        conn.close()  # not the context manager's COMMIT: on a loaded machine it can pass 1ms as well


def test_a_tiny_timeout_is_never_an_internal_error_in_the_cli(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSTORE_STATEMENT_TIMEOUT", "1ms")
    # Every command reads or writes ragstore.families; held by another transaction, it makes each command's
    # statement wait far longer than 1ms, so every one is cancelled, whatever the machine's speed.
    with psycopg.connect(dsn) as blocker:
        blocker.execute("LOCK TABLE ragstore.families IN ACCESS EXCLUSIVE MODE")
        for args in (
            ["family", "list"],
            ["family", "create", "docs", "--backend", "offline"],
            ["search", "docs", "hello"],
        ):
            result = CliRunner().invoke(cli, ["--dsn", dsn, *args])
            lines = result.output.strip().splitlines()
            assert result.exit_code == 1, (args, result.output)
            assert len(lines) == 1, (args, result.output)
            assert lines[0].startswith("error: statement cancelled (RAGSTORE_STATEMENT_TIMEOUT=1ms)"), args
        blocker.rollback()
    monkeypatch.delenv("RAGSTORE_STATEMENT_TIMEOUT")
    with connect(dsn) as conn:  # nothing was half-written: the create was cancelled whole
        assert conn.execute("SELECT count(*) FROM ragstore.families").fetchone() == (0,)


@pytest.mark.parametrize(
    ("value", "shown"), [("1500ms", "1500ms"), ("1.5s", "1500ms"), ("2min", "2min"), ("250", "250ms"), ("0", "0")]
)
def test_valid_durations_are_applied(dsn: str, monkeypatch: pytest.MonkeyPatch, value: str, shown: str) -> None:
    monkeypatch.setenv("RAGSTORE_STATEMENT_TIMEOUT", value)
    with connect(dsn, autocommit=True) as conn:
        assert conn.execute("SHOW statement_timeout").fetchone() == (shown,)
    with connect(dsn) as conn:
        conn.rollback()  # the setting outlives the transaction it was made in
        assert conn.execute("SHOW statement_timeout").fetchone() == (shown,)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("abc", "is not a duration"),
        ("-5s", "is not a duration"),
        ("10 parsecs", "is not a duration"),
        ("5 s; DROP TABLE x", "is not a duration"),
        ("1e3", "is not a duration"),
        ("99999999d", "is out of range"),
        ("500us", "is out of range"),
    ],
)
def test_bad_values_are_refused_naming_the_variable(
    dsn: str, monkeypatch: pytest.MonkeyPatch, value: str, problem: str
) -> None:
    monkeypatch.setenv("RAGSTORE_STATEMENT_TIMEOUT", value)
    with pytest.raises(InvalidInput, match=f"RAGSTORE_STATEMENT_TIMEOUT=.* {problem}"):
        connect(dsn)
    result = CliRunner().invoke(cli, ["--dsn", dsn, "family", "list"])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: RAGSTORE_STATEMENT_TIMEOUT=") and problem in lines[0]
