"""`ragstore search --explain`: the printed statements, run by hand as psql would run them (no parameters,
autocommit), give the hits the search gave, in the hnsw, fts and default (hybrid) modes; `--explain analyze`
adds each statement's plan."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from ragstore import families
from ragstore.cli.main import cli
from ragstore.embed.openai import OpenAIBackend
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.run import write_records
from tests.openai_stub import StubServer

WORDS = ("apple", "banana", "cherry", "grape", "melon", "lemon", "plum")


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


@pytest.fixture
def store(dsn: str, conn: Any, stub: StubServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """A semantic family (an OpenAI-compatible backend on 127.0.0.1): its default mode is hybrid."""
    monkeypatch.setenv("RAGSTORE_TEST_KEY", "k")
    backend = OpenAIBackend(base_url=stub.url, model="m", dim=8, api_key_env="RAGSTORE_TEST_KEY")
    fam = families.create_family(
        conn, "docs", backend, options={"base_url": stub.url, "api_key_env": "RAGSTORE_TEST_KEY"}
    )
    records = [
        (
            str(i),
            ChunkRecord(
                chunk_id=f"c{i:03d}",
                package_path=f"pkg/{i % 3}",
                text=f"{WORDS[i % 7]} {WORDS[(i * 3) % 7]} note {i}",
                metadata={"even": i % 2 == 0},
            ),
        )
        for i in range(60)
    ]
    write_records(conn, fam, backend, records)
    return dsn


def invoke(dsn: str, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--dsn", dsn, "search", "docs", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def statements(script: str) -> list[tuple[str, str]]:
    """The script's (step name, statement) pairs: a statement is the lines after a step's comments, to ';'."""
    found: list[tuple[str, str]] = []
    what, lines = "", []
    for line in script.splitlines():
        if match := re.match(r"-- step \d+: (.*)", line):
            what = match.group(1)
        elif not line.startswith("--"):
            lines.append(line)
            if line.endswith(";"):
                found.append((what, "\n".join(lines)))
                lines = []
    return found


def by_hand(dsn: str, statement: str) -> list[tuple[Any, ...]]:
    """The rows of ``statement`` sent as psql sends it: one text, no parameters, autocommit."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(statement.encode()).fetchall()


@pytest.mark.parametrize(
    ("args", "step"),
    [
        ((), "hybrid"),  # the default mode of a semantic family
        (("--mode", "fts"), "fts"),
        (("--mode", "hnsw"), "hnsw"),
        (("--mode", "hnsw", "--where", '{"even": true}'), "exact over the filtered rows"),
        (("--package", "pkg/1", "--where", '{"even": false}'), "hybrid"),
    ],
)
def test_the_printed_sql_run_by_hand_gives_the_search_hits(store: str, args: tuple[str, ...], step: str) -> None:
    hits = json.loads(invoke(store, "apple melon", "-k", "5", *args, "--json"))["hits"]
    script = invoke(store, "apple melon", "-k", "5", *args, "--explain")
    assert "%(" not in script  # every parameter inlined
    ran = statements(script)
    assert ran[0][0] == "family" and "get_family" not in ran[0][1]  # the function's text, not a name
    searches = [text for what, text in ran if what == step]
    assert len(searches) == 1, script
    rows = by_hand(store, searches[0])
    assert hits and [row[0] for row in rows] == [hit["chunk_id"] for hit in hits]
    assert [row[2] for row in rows] == pytest.approx([hit["score"] for hit in hits], abs=1e-12)


def test_explain_names_the_embedding_and_lists_the_parameters(store: str) -> None:
    script = invoke(store, "apple melon", "--explain")
    assert "(no SQL)" in script and "embed the query" in script
    assert "parameters: " in script and "query='apple melon'" in script


def test_explain_analyze_adds_the_plan_of_each_statement(store: str) -> None:
    script = invoke(store, "apple melon", "--explain", "analyze")
    assert script.count("EXPLAIN (ANALYZE, BUFFERS):") == len(statements(script)) >= 2
    assert re.search(r"^--\s+.*actual time=", script, re.MULTILINE)
    assert [what for what, _ in statements(script)] == [
        what for what, _ in statements(invoke(store, "apple melon", "--explain"))
    ]
