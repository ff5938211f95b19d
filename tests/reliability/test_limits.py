"""Input at PostgreSQL's real limits: refused in the validation pass (file, line, field named, nothing
written), or stored whole. Before, a 4 KB chunk id (btree entry size) and a 3 MB text (tsvector's 1 MB
limit) passed validation and failed in the database after earlier batches were committed.

Also the family registry's limits: a full-text configuration the database lacks, and a zero dimension.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ragstore import families
from ragstore.cli.main import cli
from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import InvalidInput
from ragstore.ingest.readers import open_sources
from ragstore.ingest.records import MAX_ID_BYTES
from ragstore.ingest.run import index_sources
from ragstore.search import search
from tests.reliability.helpers import chunk, distinct_words, table_hashes, write_jsonl

pytestmark = pytest.mark.reliability


def wide_chars(n: int, seed: int = 7) -> str:
    """``n`` random 4-byte UTF-8 characters (CJK extension B): incompressible, 4n bytes."""
    rng = random.Random(seed)
    return "".join(chr(rng.randrange(0x20000, 0x2A6DF)) for _ in range(n))


@pytest.fixture
def store(dsn: str, tmp_path: Path) -> str:
    with connect(dsn) as conn:
        families.create_family(conn, "docs", OfflineBackend())
        index_sources(conn, "docs", open_sources([str(write_jsonl(tmp_path / "base.jsonl", map(chunk, range(5))))]))
    return dsn


def _refused(dsn: str, path: Path) -> str:
    before = table_hashes(dsn)
    with connect(dsn) as conn, pytest.raises(InvalidInput) as caught:
        # batch_size 1: the three good lines would each be committed before line 4 if validation let it by
        index_sources(conn, "docs", open_sources([str(path)]), batch_size=1)
    assert table_hashes(dsn) == before
    message = str(caught.value)
    assert f"{path}:4" in message and "\n" not in message, message
    return message


def _three_good_then(tmp_path: Path, bad: dict[str, Any]) -> Path:
    rows = [{"chunk_id": f"new{i}", "package_path": "p", "text": f"good {i}"} for i in range(3)]
    return write_jsonl(tmp_path / "in.jsonl", [*rows, bad])


@pytest.mark.parametrize("field", ["chunk_id", "package_path"])
def test_an_identifier_over_the_btree_limit_is_refused_before_anything_is_written(
    store: str, tmp_path: Path, field: str
) -> None:
    bad = {"chunk_id": "x", "package_path": "p", "text": "t"} | {field: wide_chars(1005)}
    message = _refused(store, _three_good_then(tmp_path, bad))
    assert field in message and str(MAX_ID_BYTES) in message.replace(",", "")


def test_identifiers_at_the_documented_byte_limit_are_stored(store: str, tmp_path: Path) -> None:
    long_id = wide_chars(MAX_ID_BYTES // 4, seed=1)
    long_package = wide_chars(MAX_ID_BYTES // 4, seed=2)
    assert len(long_id.encode()) == MAX_ID_BYTES
    path = write_jsonl(tmp_path / "ok.jsonl", [{"chunk_id": long_id, "package_path": long_package, "text": "fits"}])
    with connect(store) as conn:
        families.create_family(conn, "a_family_name_of_the_longest_length_allowed_xyz", OfflineBackend())
        for name in ("docs", "a_family_name_of_the_longest_length_allowed_xyz"):
            report = index_sources(conn, name, open_sources([str(path)]), prune=True)
            assert report.inserted == 1
            hits = search(conn, name, "fits", k=3, mode="fts", package=long_package)
            assert [h.chunk_id for h in hits] == [long_id]


def test_a_text_whose_full_text_vector_exceeds_the_limit_is_refused_before_anything_is_written(
    store: str, tmp_path: Path
) -> None:
    bad = {"chunk_id": "big", "package_path": "p", "text": distinct_words(3 * 1024 * 1024)}
    message = _refused(store, _three_good_then(tmp_path, bad))
    assert "text" in message and "1 MB" in message


def test_a_large_text_within_the_limit_is_stored(store: str, tmp_path: Path) -> None:
    text = distinct_words(600 * 1024)
    path = write_jsonl(tmp_path / "ok.jsonl", [{"chunk_id": "big", "package_path": "p", "text": text}])
    with connect(store) as conn:
        assert index_sources(conn, "docs", open_sources([str(path)])).inserted == 1
        assert [h.chunk_id for h in search(conn, "docs", "w0000123x", k=3, mode="fts")] == ["big"]


def test_the_cli_names_the_line_and_field_of_an_oversized_id(store: str, tmp_path: Path) -> None:
    path = _three_good_then(tmp_path, {"chunk_id": wide_chars(1005), "package_path": "p", "text": "t"})
    before = table_hashes(store)
    result = CliRunner().invoke(cli, ["--dsn", store, "index", "docs", str(path), "--batch-size", "1"])
    assert result.exit_code != 0
    assert f"{path}:4" in result.output and "chunk_id" in result.output and "Traceback" not in result.output
    assert table_hashes(store) == before


# -- the family registry -------------------------------------------------------------------------------


def test_family_create_refuses_a_text_search_configuration_the_database_lacks(dsn: str) -> None:
    with connect(dsn) as conn:
        with pytest.raises(InvalidInput, match="klingon"):
            families.create_family(conn, "docs", OfflineBackend(), options={"fts_config": "klingon"})
        conn.rollback()
        assert families.list_families(conn) == []
        assert conn.execute("SELECT to_regclass('ragstore.emb_docs')").fetchone() == (None,)
    result = CliRunner().invoke(
        cli, ["--dsn", dsn, "family", "create", "docs", "--backend", "offline", "--fts-config", "klingon"]
    )
    assert result.exit_code != 0 and "klingon" in result.output and "Traceback" not in result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1, result.output
    ok = CliRunner().invoke(
        cli, ["--dsn", dsn, "family", "create", "docs", "--backend", "offline", "--fts-config", "simple"]
    )
    assert ok.exit_code == 0, ok.output


@pytest.mark.parametrize("value", ["0", "-3"])
def test_family_create_refuses_a_zero_or_negative_dimension(dsn: str, value: str) -> None:
    args = ["--dsn", dsn, "family", "create", "docs", "--backend", "openai", "--model", "m"]
    args += ["--base-url", "http://127.0.0.1:9/v1", "--dimensions", value]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code != 0 and "dimensions" in result.output, result.output
    with connect(dsn) as conn:
        assert families.list_families(conn) == []


def test_an_unknown_configuration_in_the_registry_fails_index_with_a_clear_error(dsn: str, tmp_path: Path) -> None:
    """A family registered before the check (or edited by hand) names a missing configuration."""
    with connect(dsn) as conn:
        families.create_family(conn, "docs", OfflineBackend())
        conn.execute("UPDATE ragstore.families SET options = '{\"fts_config\": \"klingon\"}' WHERE name = 'docs'")
        conn.commit()
        path = write_jsonl(tmp_path / "c.jsonl", [chunk(0)])
        with pytest.raises(InvalidInput, match="klingon"):
            index_sources(conn, "docs", open_sources([str(path)]))


# -- agent memory: the same limits, refused before anything is written ----------------------------------


def _memory_line(**fields: Any) -> str:
    import json

    record = {"agent": "ana", "store": "semantic", "at": "2026-01-01T00:00:00Z", "content": "note"} | fields
    return json.dumps(record, ensure_ascii=False)


@pytest.mark.parametrize(
    ("fields", "field"),
    [({"id": "x" * 3000}, "id"), ({"id": "big", "content": distinct_words(300 * 1024)}, "content")],
)
def test_memory_import_over_a_database_limit_names_file_line_and_field_and_writes_nothing(
    dsn: str, tmp_path: Path, fields: dict[str, Any], field: str
) -> None:
    from ragstore.memory import import_jsonl

    notes = tmp_path / "notes.jsonl"
    notes.write_text(_memory_line(id="fine") + "\n" + _memory_line(**fields) + "\n", encoding="utf-8")
    with connect(dsn) as conn:
        with pytest.raises(InvalidInput) as caught:
            import_jsonl(conn, notes)
        conn.rollback()
        assert conn.execute("SELECT count(*) FROM ragstore.memory").fetchone() == (0,)
    message = str(caught.value)
    assert message.startswith(f"{notes}:2:") and field in message and "database unavailable" not in message


def test_a_value_over_a_server_limit_is_invalid_input_not_an_outage(dsn: str) -> None:
    from ragstore.db.connection import db_errors

    with connect(dsn) as conn, pytest.raises(InvalidInput, match="over a database limit"), db_errors():
        conn.execute("SELECT length(to_tsvector('simple', %s))", (distinct_words(3 * 1024 * 1024),))
