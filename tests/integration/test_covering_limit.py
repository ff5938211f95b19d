"""A record too large for a family's covering filter-key index is refused before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragstore import families
from ragstore.cli.main import cli
from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend
from ragstore.families import filter_keys
from tests.toolkit.roles import app_dsn  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("each_storage")  # each test once per index storage


def _blob(n: int) -> str:
    """Text that does not compress: a covering entry holds it as written."""
    return "".join(f"{i * 7919 % 10007:05d}" for i in range(n))


def _line(i: int, metadata: dict[str, object]) -> str:
    return json.dumps({"chunk_id": f"c{i:05d}", "package_path": "pkg", "text": f"text {i}", "metadata": metadata})


def test_an_oversized_covering_entry_late_in_the_input_writes_nothing_as_the_app(
    dsn: str,
    app_dsn: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    with connect(dsn) as conn:
        families.create_family(conn, "docs", OfflineBackend())
        filter_keys.add_key(conn, "docs", "lang", covering=True)
    first = tmp_path / "first.jsonl"
    first.write_text("".join(_line(i, {"lang": "en"}) + "\n" for i in range(20)), encoding="utf-8")
    runner = CliRunner()
    assert runner.invoke(cli, ["--dsn", app_dsn, "index", "docs", str(first)], catch_exceptions=False).exit_code == 0
    rows = [_line(i, {"lang": "en", "n": i}) for i in range(20, 3020)]
    rows[2700] = _line(2720, {"lang": "en", "b": _blob(800)})  # a few batches in
    second = tmp_path / "second.jsonl"
    second.write_text("".join(r + "\n" for r in rows), encoding="utf-8")
    for _ in range(2):  # a rerun says and does the same
        result = runner.invoke(cli, ["--dsn", app_dsn, "index", "docs", str(second), "--batch-size", "500"])
        assert result.exit_code != 0
        assert "Traceback" not in result.output
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert len(lines) == 1, result.output
        assert "second.jsonl:2701: metadata:" in lines[0], lines[0]
        assert "nothing was written" in lines[0] and "2,704" in lines[0], lines[0]
        with connect(dsn) as conn:
            assert conn.execute("SELECT count(*) FROM ragstore.emb_docs").fetchone() == (20,)
            assert conn.execute("SELECT count(*) FROM ragstore.chunks").fetchone() == (20,)


def test_a_covering_entry_just_under_the_limit_is_written(dsn: str, tmp_path: Path) -> None:
    with connect(dsn) as conn:
        families.create_family(conn, "docs", OfflineBackend())
        filter_keys.add_key(conn, "docs", "lang", covering=True)
    path = tmp_path / "a.jsonl"
    path.write_text(_line(1, {"lang": "en", "b": _blob(150)}) + "\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["--dsn", dsn, "index", "docs", str(path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    with connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM ragstore.emb_docs").fetchone() == (1,)
