"""The two search drivers turn one loop (ragstore.search.drive.advance): a failing statement reaches the plan
as the same mapped RagstoreError, caused by the psycopg error, on a sync and an async connection, and the
plan may handle it and go on."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from ragstore.db.connection import connect
from ragstore.errors import InvalidInput, SchemaError
from ragstore.search import drive, drive_async
from ragstore.search.drive import Plan, Rows


def failing_then_answering() -> Plan[tuple[str, Any, int]]:
    """Catches the error of a division by zero, then answers with the error and the rows of a good statement."""
    try:
        yield Rows("SELECT 1 / 0", {}, "division by zero", isolated=False)  # the raw error reaches the loop
    except Exception as exc:  # what the driver threw in is the subject
        caught = exc
    else:
        raise AssertionError("the failing statement returned rows")
    rows = yield Rows("SELECT 41 + 1", {}, "a good statement")
    return type(caught).__name__, caught.__cause__, rows[0][0]


def unhandled() -> Plan[None]:
    yield Rows("SELECT * FROM ragstore.no_such_table", {}, "a table that is not there", isolated=False)


def check(answer: tuple[str, Any, int]) -> None:
    name, cause, value = answer
    assert name == InvalidInput.__name__ and isinstance(cause, psycopg.errors.DivisionByZero)
    assert value == 42


def test_the_sync_driver_throws_the_mapped_error_into_the_plan(dsn: str) -> None:
    with connect(dsn, autocommit=True) as conn:
        check(drive.run(conn, failing_then_answering()))
        with pytest.raises(SchemaError) as raised:
            drive.run(conn, unhandled())
        assert isinstance(raised.value.__cause__, psycopg.errors.UndefinedTable)


async def test_the_async_driver_throws_the_same_mapped_error(dsn: str) -> None:
    async def blocking(fn: Any) -> Any:
        raise AssertionError("no step here needs a synchronous connection")

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        check(await drive_async.run(conn, failing_then_answering(), blocking))
        with pytest.raises(SchemaError) as raised:
            await drive_async.run(conn, unhandled(), blocking)
        assert isinstance(raised.value.__cause__, psycopg.errors.UndefinedTable)


# A step's settings (what Citus's HNSW steps carry) run first, in the statement's transaction, and are gone
# after it: here a setting of ragstore's own name, which any server takes.
PROBE = "SELECT current_setting('ragstore.probe', true)"
SETTINGS_FIRST = Rows(PROBE, {}, "settings first", settings=(psycopg.sql.SQL("SET LOCAL ragstore.probe = '7'"),))


def settings_first() -> Plan[tuple[Any, Any]]:
    inside = yield SETTINGS_FIRST
    after = yield Rows(PROBE, {}, "after", isolated=False)
    return inside[0][0], after[0][0]


def test_the_sync_driver_runs_a_steps_settings_first_and_keeps_none(dsn: str) -> None:
    with connect(dsn, autocommit=True) as conn:
        inside, after = drive.run(conn, settings_first())
    assert inside == "7" and not after  # '' or NULL: the setting ended with the step's transaction


async def test_the_async_driver_runs_a_steps_settings_first_and_keeps_none(dsn: str) -> None:
    async def blocking(fn: Any) -> Any:
        raise AssertionError("no step here needs a synchronous connection")

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        inside, after = await drive_async.run(conn, settings_first(), blocking)
    assert inside == "7" and not after
