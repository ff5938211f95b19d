"""Hostile input (tests/data/hostile/): each file gets a clear error naming its line, or is handled correctly;
a rejected input leaves every ragstore table byte-for-byte unchanged (hashes include timestamps).
Hypothesis fuzzes the record validator and the JSONL reader: InvalidInput or success, never a partial write.
"""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from ragstore import families
from ragstore.cli.main import cli
from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend, fingerprint
from ragstore.errors import InvalidInput
from ragstore.ingest.readers import open_sources, read_jsonl
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.run import index_sources
from ragstore.search import search
from tests.reliability.helpers import chunk, table_hashes, write_jsonl

pytestmark = pytest.mark.reliability

HOSTILE = Path(__file__).resolve().parents[1] / "data" / "hostile"
REJECTED = sorted(p.name for p in HOSTILE.glob("*.jsonl") if not p.name.startswith("accepted"))


@pytest.fixture
def store(dsn: str, tmp_path: Path) -> str:
    """Family ``docs`` holding 30 chunks, so that "unchanged" means something."""
    with connect(dsn) as conn:
        families.create_family(conn, "docs", OfflineBackend())
        index_sources(
            conn, "docs", open_sources([str(write_jsonl(tmp_path / "base.jsonl", (chunk(i) for i in range(30))))])
        )
    return dsn


def _index(dsn: str, path: Path) -> None:
    with connect(dsn) as conn:
        index_sources(conn, "docs", open_sources([str(path)]))


def test_every_rejected_file_names_its_line_and_leaves_the_store_unchanged(store: str) -> None:
    assert len(REJECTED) >= 25
    before = table_hashes(store)
    for name in REJECTED:
        with pytest.raises(InvalidInput) as caught:
            _index(store, HOSTILE / name)
        message = str(caught.value)
        assert f"{name}:4" in message, (name, message)  # three good lines come first
        assert "\n" not in message and len(message) < 400, (name, message)
        assert table_hashes(store) == before, name


@pytest.mark.parametrize("name", ["invalid_utf8.jsonl", "deep_10000.jsonl", "vector_wrong_dim.jsonl"])
def test_cli_prints_one_line_for_hostile_files(store: str, name: str) -> None:
    before = table_hashes(store)
    result = CliRunner().invoke(cli, ["--dsn", store, "index", "docs", str(HOSTILE / name)])
    assert result.exit_code == 1
    assert result.output.startswith("error: ") and len(result.output.strip().splitlines()) == 1, result.output
    assert table_hashes(store) == before


def test_a_100_mb_line_is_refused_without_reading_it_whole(store: str, tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    with open(path, "wb") as out:
        out.write((json.dumps(chunk(1)) + "\n").encode())
        out.write(b'{"chunk_id": "huge", "package_path": "p", "text": "')
        block = b"a" * (1024 * 1024)
        for _ in range(100):
            out.write(block)
        out.write(b'"}\n')
    before = table_hashes(store)
    with pytest.raises(InvalidInput, match=r"huge.jsonl:2: line longer than 16 MiB"):
        _index(store, path)
    assert table_hashes(store) == before


def test_rtl_zero_width_and_injection_text_are_stored_verbatim(store: str) -> None:
    path = HOSTILE / "accepted_unicode_and_injection.jsonl"
    expected = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    _index(store, path)
    with connect(store) as conn:
        for record in expected:
            row = conn.execute(
                "SELECT c.package_path, c.text, c.metadata, e.embedding FROM ragstore.chunks c "
                "JOIN ragstore.emb_docs e USING (chunk_id) WHERE c.chunk_id = %s",
                (record["chunk_id"],),
            ).fetchone()
            assert row is not None, record["chunk_id"]
            assert row[0] == record["package_path"] and row[1] == record["text"]
            assert row[2] == record.get("metadata", {})
            assert (row[3].to_numpy() == fingerprint([record["text"]])[0]).all()
        # The "injection" did nothing: every table is still there, and counts are what was written.
        assert conn.execute("SELECT count(*) FROM ragstore.chunks").fetchone() == (30 + len(expected),)
        assert conn.execute("SELECT to_regclass('ragstore.chunks') IS NOT NULL").fetchone() == (True,)
    before = table_hashes(store)
    _index(store, path)  # idempotent on hostile-but-valid text too
    assert table_hashes(store) == before


def test_prune_of_a_package_with_like_wildcards_and_quotes_removes_only_its_own(store: str, tmp_path: Path) -> None:
    folder = tmp_path / "we%ird_'\"dir"
    folder.mkdir()
    (folder / "a.md").write_text("first document")
    (folder / "b.md").write_text("second document")
    sibling = tmp_path / "weXirdX'\"dir"  # matches the folder name if % and _ were wildcards
    sibling.mkdir()
    (sibling / "c.md").write_text("sibling document")
    for f in (folder, sibling):
        _index(store, f)
    (folder / "b.md").unlink()
    with connect(store) as conn:
        report = index_sources(conn, "docs", open_sources([str(folder)]), prune=True)
    assert report.pruned == 1
    with psycopg.connect(store) as conn:
        paths = {r[0] for r in conn.execute("SELECT package_path FROM ragstore.chunks WHERE package_path LIKE 'we%'")}
    assert paths == {"we%ird_'\"dir/a.md", "weXirdX'\"dir/c.md"}


@pytest.mark.parametrize(
    "name",
    [
        "docs; DROP TABLE ragstore.chunks",
        "Robert'); DROP TABLE x;--",
        'a"b',
        "UPPER",
        "a-b",
        "",
        "x" * 49,
        "émoji",
        "a\x00b",
    ],
)
def test_family_names_crafted_as_sql_are_refused(store: str, name: str) -> None:
    before = table_hashes(store)
    with connect(store) as conn, pytest.raises(InvalidInput, match="invalid family name"):
        families.create_family(conn, name, OfflineBackend())
    result = CliRunner().invoke(cli, ["--dsn", store, "family", "create", name, "--backend", "offline"])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert table_hashes(store) == before


@pytest.mark.parametrize("mode", ["hnsw", "exact", "fts", "hybrid"])
def test_search_filters_and_queries_with_quotes_are_data(store: str, mode: str) -> None:
    _index(store, HOSTILE / "accepted_unicode_and_injection.jsonl")
    before = table_hashes(store)
    with connect(store) as conn:
        hits = search(conn, "docs", "Robert DROP TABLE", k=5, mode=mode, metadata={"k'ey": "va\"l'ue"})
        assert [h.chunk_id for h in hits] == ["'; DROP TABLE ragstore.chunks; --"]
        hits = search(conn, "docs", "Robert DROP TABLE", k=5, mode=mode, package="hostile/%_'\"\\")
        assert [h.chunk_id for h in hits] == ["'; DROP TABLE ragstore.chunks; --"]
        # "_" and "%" in a package prefix are literal characters, not LIKE wildcards.
        assert search(conn, "docs", "zero width", k=5, mode=mode, package="hostile/_w") == []
        for q in ['"unbalanced', "'", "-", "or or", "!!!", ":*", "a & | b", "'; DROP TABLE x; --", "\u200b"]:
            search(conn, "docs", q, k=3, mode=mode)  # no error for any websearch_to_tsquery edge case
    assert table_hashes(store) == before


# -- hypothesis --------------------------------------------------------------------------------------------
json_leaf = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
json_value = st.recursive(
    json_leaf, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(), c, max_size=3), max_leaves=10
)
field_value = st.one_of(json_value, st.text(), st.lists(st.floats(), max_size=20))
record_dicts = st.dictionaries(
    st.sampled_from(["chunk_id", "package_path", "text", "metadata", "vector", "model", "extra"]), field_value
) | st.fixed_dictionaries(
    {"chunk_id": st.text(), "package_path": st.text(), "text": st.text()},
    optional={
        "metadata": st.dictionaries(st.text(), json_value, max_size=4),
        "vector": st.lists(st.floats(), max_size=4),
    },
)


@given(record_dicts)
@settings(max_examples=400, deadline=None)
def test_chunk_record_raises_only_validation_errors(data: dict[str, object]) -> None:
    try:
        record = ChunkRecord.model_validate(data)
    except ValidationError:
        return
    # Whatever it accepted, PostgreSQL can store: no NUL, valid UTF-8, finite float32 vector.
    assert "\x00" not in record.text + record.chunk_id + record.package_path
    (record.text + record.chunk_id + record.package_path).encode("utf-8")
    json.dumps(record.metadata, allow_nan=False).encode("utf-8")
    assert record.vector is None or all(abs(x) <= 3.4e38 for x in record.vector)


line_bytes = st.one_of(
    st.binary(max_size=200),
    record_dicts.map(lambda d: json.dumps(d, ensure_ascii=False, allow_nan=True).encode("utf-8", "surrogatepass")),
)


@given(st.lists(line_bytes, min_size=1, max_size=6))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_jsonl_reader_raises_only_invalid_input(tmp_path: Path, lines: list[bytes]) -> None:
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(b"\n".join(line.replace(b"\n", b" ") for line in lines) + b"\n")
    try:
        for _ in read_jsonl(path):
            pass
    except InvalidInput:
        pass


@given(st.lists(line_bytes, min_size=1, max_size=4), st.integers(min_value=0, max_value=40))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_fuzzed_input_is_written_whole_or_not_at_all(store: str, tmp_path: Path, lines: list[bytes], at: int) -> None:
    good = [json.dumps(chunk(1000 + i)).encode() for i in range(40)]
    good[at:at] = [line.replace(b"\n", b" ") for line in lines]
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\n".join(good) + b"\n")
    before = table_hashes(store)
    try:
        _index(store, path)
    except InvalidInput:
        assert table_hashes(store) == before
        return
    with psycopg.connect(store) as conn:
        ids = {r[0] for r in conn.execute("SELECT chunk_id FROM ragstore.chunks WHERE chunk_id LIKE 'doc-001%'")}
    assert {f"doc-{1000 + i:06d}" for i in range(40)} <= ids
