"""Hostile values at the command line: --where the server would refuse, -k beyond the maximum, stored
values with control characters in a terminal table, lone surrogates in memory import. Each is one clear
line naming the option, file, line or field; nothing reaches the database that it would refuse."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from ragstore import families
from ragstore.cli.family import family_group
from ragstore.cli.main import AppContext, RagstoreGroup, terminal_safe
from ragstore.cli.memory import memory_group
from ragstore.cli.search import check_recall_command, search_command
from ragstore.db.connection import connect, run_isolated
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import DatabaseUnavailable, InvalidInput
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.run import write_records
from ragstore.search import search
from ragstore.search.api import MAX_K


@click.group(cls=RagstoreGroup)
@click.option("--dsn", default=None)
@click.pass_context
def cli(ctx: click.Context, dsn: str | None) -> None:
    ctx.obj = AppContext(dsn=dsn, debug=False)


cli.add_command(search_command)
cli.add_command(check_recall_command)
cli.add_command(memory_group)
cli.add_command(family_group)

ROWS = 300


@pytest.fixture
def store(dsn: str) -> str:
    with connect(dsn) as conn:
        fam = families.create_family(conn, "docs", OfflineBackend())
        records = [
            (
                str(i),
                ChunkRecord(
                    chunk_id=f"c{i:04d}",
                    package_path=f"pkg/{i % 3}",
                    text=f"alpha chunk {i} topic {i % 5}",
                    metadata={"n": i % 2},
                ),
            )
            for i in range(ROWS)
        ]
        write_records(conn, fam, OfflineBackend(), records)
    return dsn


def invoke(dsn: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--dsn", dsn, *args])


def _one_line_error(result: Result) -> str:
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "internal error" not in lines[0] and "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ('{"a": "x\\u0000y"}', "--where.a: holds a NUL character"),
        ('{"a": NaN}', "--where: not accepted: NaN is not JSON"),
        ('{"a": Infinity}', "--where: not accepted: Infinity is not JSON"),
        ('{"a": -Infinity}', "--where: not accepted: -Infinity is not JSON"),
        ('{"a": 1e999}', "--where.a: inf is not a finite number"),
        ('{"a": "\\ud800"}', "--where.a: holds a lone surrogate"),
        ('{"\\ud800": 1}', "--where: a key holds a lone surrogate"),
        ('{"a": ' + "[" * 3000 + "]" * 3000 + "}", "--where: JSON nested 3001 levels deep; at most 32"),
        ("[1, 2]", "--where must be a JSON object"),
        ('{"a" 1}', "--where: not JSON (Expecting ':' delimiter"),
    ],
)
@pytest.mark.parametrize("command", ["search", "check-recall"])
def test_where_values_the_server_would_refuse_are_refused_first_naming_where(
    store: str, command: str, where: str, expected: str
) -> None:
    args = ["search", "docs", "alpha", "--where", where] if command == "search" else [command, "docs", "--where", where]
    line = _one_line_error(invoke(store, *args))
    assert line.startswith(f"error: {expected}"), line


def test_library_metadata_is_checked_before_any_database_call(store: str) -> None:
    # A closed connection fails any statement: a search that reaches it made a database call.
    conn = connect(store)
    conn.close()
    with pytest.raises(DatabaseUnavailable, match="the connection is closed"):  # the control: a valid search
        search(conn, "docs", "alpha", metadata={"n": 1})  # does call the database
    for metadata in ({"a": float("nan")}, {"a": "\x00"}, {"a": "\udc80"}, {"a": [[[[1]]]] * 1}):
        nested: object = metadata
        if metadata == {"a": [[[[1]]]]}:
            for _ in range(40):
                nested = {"a": nested}
        with pytest.raises(InvalidInput, match=r"^metadata"):
            search(conn, "docs", "alpha", metadata=nested)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match=r"^package holds a NUL"):
        search(conn, "docs", "alpha", package="a\x00")


def test_a_failing_statement_in_a_pipeline_never_logs_error_ignored(
    store: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="psycopg")
    with connect(store) as conn:
        conn.autocommit = True
        for _ in range(5):
            with pytest.raises(InvalidInput, match="division by zero"):
                run_isolated(conn, [("SELECT 1/0", None), *[("SELECT 1", None)] * 300])
        conn.autocommit = False
        with pytest.raises(InvalidInput, match="division by zero"):
            run_isolated(conn, [("SELECT 1/0", None), *[("SELECT 1", None)] * 300])
        assert run_isolated(conn, [("SELECT 2", None), ("SELECT 3", None)]) == [[(2,)], [(3,)]]
    assert [r.getMessage() for r in caplog.records if "error ignored" in r.getMessage()] == []


@pytest.mark.parametrize("mode", ["hnsw", "exact", "fts", "hybrid"])
def test_k_above_the_maximum_is_refused_in_every_mode(store: str, mode: str) -> None:
    line = _one_line_error(invoke(store, "search", "docs", "alpha", "-k", "1000000000", "--mode", mode))
    assert line == f"error: k must be at most {MAX_K} (a search returns at most {MAX_K} hits), got 1000000000"
    with connect(store) as conn, pytest.raises(InvalidInput, match="k must be at most"):
        search(conn, "docs", "alpha", k=MAX_K + 1, mode=mode)


@pytest.mark.parametrize("mode", ["hnsw", "exact", "fts", "hybrid"])
def test_k_up_to_the_maximum_returns_every_matching_row(store: str, mode: str) -> None:
    result = invoke(store, "search", "docs", "alpha", "-k", str(MAX_K), "--mode", mode, "--json")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.output)["hits"]) == ROWS


def test_control_characters_in_stored_values_never_forge_a_table_line(dsn: str) -> None:
    forged = "evil\n  2    0.9999  [forged#line]\x1b[31m\r\u2028"
    with connect(dsn) as conn:
        fam = families.create_family(conn, "docs", OfflineBackend())
        record = ChunkRecord(chunk_id=forged, package_path="p\x1b]0;title\x07", text="alpha\x1b[2Jtext")
        write_records(conn, fam, OfflineBackend(), [("1", record)])
    table = invoke(dsn, "search", "docs", "alpha", "--mode", "fts")
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    assert len(lines) == 2, lines
    assert "\x1b" not in table.output and "\r" not in table.output and "\u2028" not in table.output
    assert "evil\\n  2    0.9999  [forged#line]\\x1b[31m\\r\\u2028" in lines[0]
    as_json = json.loads(invoke(dsn, "search", "docs", "alpha", "--mode", "fts", "--json").output)
    assert as_json["hits"][0]["chunk_id"] == forged  # JSON output is unchanged


def test_terminal_safe_escapes_every_control_character() -> None:
    assert terminal_safe("a\nb\tc\x00d\x7fe\x9bf\u202eg") == "a\\nb\\tc\\x00d\\x7fe\\x9bf\\u202eg"
    assert terminal_safe("plain é ✓ text") == "plain é ✓ text"


def test_memory_import_of_a_lone_surrogate_names_file_line_and_field(dsn: str, tmp_path: Path) -> None:
    bad = tmp_path / "m.jsonl"
    good = {"agent": "ana", "store": "semantic", "at": "2026-01-01T00:00:00Z", "content": "fine"}
    lines = [json.dumps(good), json.dumps(good | {"content": "broken \ud800 text"})]
    bad.write_text("\n".join(lines) + "\n")
    line = _one_line_error(invoke(dsn, "memory", "import", str(bad)))
    assert line == f"error: {bad}:2: field 'content': holds a lone surrogate (not valid Unicode text)"
    bad.write_text(json.dumps(good | {"metadata": {"k": ["x", "\udfff"]}}) + "\n")
    line = _one_line_error(invoke(dsn, "memory", "import", str(bad)))
    assert line == f"error: {bad}:1: field 'metadata': holds a lone surrogate (not valid Unicode text)"


@pytest.mark.parametrize("mode", ["auto", "hnsw", "exact", "fts", "hybrid"])
def test_a_query_holding_an_undecodable_byte_or_nul_is_one_clear_line(store: str, mode: str) -> None:
    # an argument holding the byte 0xff reaches Python as the lone surrogate U+DCFF
    for query, problem in (("abc\udcff", "a lone surrogate"), ("abc\x00", "a NUL character")):
        line = _one_line_error(invoke(store, "search", "docs", query, "--mode", mode))
        assert line.startswith(f"error: the query holds {problem}"), line


def test_memory_import_of_json_nested_too_deep_names_file_and_line(dsn: str, tmp_path: Path) -> None:
    deep = tmp_path / "m.jsonl"
    good = {"agent": "ana", "store": "semantic", "at": "2026-01-01T00:00:00Z", "content": "fine"}
    nested = json.dumps(good)[:-1] + ', "metadata": {"a": ' + "[" * 5000 + "]" * 5000 + "}}"
    deep.write_text(json.dumps(good) + "\n" + nested + "\n")
    line = _one_line_error(invoke(dsn, "memory", "import", str(deep)))
    assert line == f"error: {deep}:2: JSON nested 5002 levels deep; at most 64 are accepted"
