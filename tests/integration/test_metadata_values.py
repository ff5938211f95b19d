"""Metadata values JSON does not have (dates, decimals, UUIDs, bytes, sets…), mapped or refused the same way at
every door: Store.index records, the LangChain and LlamaIndex adapters, Parquet columns, memory records."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ragstore import Store, families
from ragstore.cli.main import cli
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import InvalidInput

pytestmark = pytest.mark.usefixtures("each_storage")  # each test once per index storage

AWARE = dt.datetime(2024, 5, 1, 12, 30, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
NAIVE = dt.datetime(2024, 5, 1, 12, 30, 0, 250000)
UID = uuid.UUID("12345678-1234-5678-1234-567812345678")

GIVEN: dict[str, Any] = {
    "aware": AWARE,
    "naive": NAIVE,
    "day": dt.date(2024, 5, 1),
    "clock": dt.time(7, 5, 3),
    "price": Decimal("19.99"),
    "count": Decimal("12"),
    "id": UID,
    "pair": (1, "a"),
    "nested": {"when": [dt.date(2000, 1, 2)]},
}
STORED = {
    "aware": "2024-05-01T12:30:00+02:00",
    "naive": "2024-05-01T12:30:00.250000",
    "day": "2024-05-01",
    "clock": "07:05:03",
    "price": 19.99,
    "count": 12,
    "id": "12345678-1234-5678-1234-567812345678",
    "pair": [1, "a"],
    "nested": {"when": ["2000-01-02"]},
}
REFUSED = [
    (b"\x00\x01", "bytes are not JSON; decode or base64 them first"),
    ({"a", "b"}, "a set is not JSON"),
    (object(), "object is not JSON"),
    (Decimal("NaN"), "not a finite number"),
    (Decimal("0.1000000000000000000001"), "more digits than a JSON number keeps"),
    (float("inf"), "not a finite number"),
    (10**400, "an integer of 401 digits is beyond what a float holds"),
]


def _stored(dsn: str, family: str = "docs") -> dict[str, Any]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT metadata FROM ragstore.chunks WHERE family = %s", (family,)).fetchone()
    assert row is not None
    return dict(row[0])


def _count(dsn: str) -> int:
    import psycopg

    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM ragstore.chunks").fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture
def store(dsn: str, conn: Any) -> Any:
    families.create_family(conn, "docs", OfflineBackend())
    conn.commit()
    with Store(dsn) as s:
        yield s


def test_store_index_maps_dates_decimals_and_uuids_to_json(dsn: str, store: Any) -> None:
    store.index([{"chunk_id": "a", "package_path": "p", "text": "hello", "metadata": GIVEN}], "docs")
    assert _stored(dsn) == STORED
    again = store.index([{"chunk_id": "a", "package_path": "p", "text": "hello", "metadata": GIVEN}], "docs")
    assert again.unchanged == 1  # the same mapping, the same bytes


@pytest.mark.parametrize(("value", "words"), REFUSED)
def test_store_index_refuses_values_without_a_json_form_naming_the_field(
    dsn: str, store: Any, value: Any, words: str
) -> None:
    good = {"chunk_id": "a", "package_path": "p", "text": "hello"}
    with pytest.raises(InvalidInput, match=rf"^record 2: metadata\.created: .*{words}"):
        store.index([good, {**good, "chunk_id": "b", "metadata": {"created": value}}], "docs")
    assert _count(dsn) == 0


def test_the_langchain_adapter_maps_and_refuses_the_same(dsn: str) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from ragstore.integrations.langchain import RagstoreVectorStore

    with RagstoreVectorStore(DeterministicFakeEmbedding(size=8), family="lc", dsn=dsn) as vs:
        vs.add_texts(["hello"], [GIVEN], ids=["a"])
        assert _stored(dsn, "lc") == STORED
        for value, words in REFUSED:
            with pytest.raises(InvalidInput, match=rf"metadata\.created: .*{words}"):
                vs.add_texts(["other"], [{"created": value}], ids=["b"])
        assert vs.get_by_ids(["b"]) == []


def test_the_llamaindex_adapter_maps_and_refuses_the_same(dsn: str) -> None:
    pytest.importorskip("llama_index.core")
    from llama_index.core.schema import TextNode

    from ragstore.integrations.llamaindex import RagstoreVectorStore

    pg = RagstoreVectorStore("li", dsn, embed_dim=2, model_name="test-model")
    try:
        pg.add([TextNode(text="hello", id_="a", metadata={"day": dt.date(2024, 5, 1)}, embedding=[1.0, 0.5])])
        assert _stored(dsn, "li")["day"] == "2024-05-01"
        with pytest.raises(InvalidInput, match=r"node 'b': metadata\.blob: bytes are not JSON"):
            pg.add([TextNode(text="other", id_="b", metadata={"blob": b"x"}, embedding=[1.0, 0.5])])
    finally:
        pg.close()


def test_parquet_metadata_columns_of_timestamps_dates_and_decimals_are_mapped(
    dsn: str, store: Any, tmp_path: Path
) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table(
        {
            "chunk_id": ["a"],
            "package_path": ["p"],
            "text": ["hello"],
            "at": pa.array([AWARE], type=pa.timestamp("us", tz="UTC")),
            "seen": pa.array([NAIVE], type=pa.timestamp("us")),
            "day": pa.array([dt.date(2024, 5, 1)], type=pa.date32()),
            "price": pa.array([Decimal("19.99")], type=pa.decimal128(10, 2)),
        }
    )
    path = tmp_path / "m.parquet"
    pq.write_table(table, path)
    args = ["--dsn", dsn, "index", "docs", str(path), "--column", "metadata=at,seen,day,price"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert _stored(dsn) == {
        "at": "2024-05-01T10:30:00+00:00",
        "seen": "2024-05-01T12:30:00.250000",
        "day": "2024-05-01",
        "price": 19.99,
    }


def test_a_parquet_binary_metadata_column_is_one_line_naming_row_and_field(
    dsn: str, store: Any, tmp_path: Path
) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table(
        {
            "chunk_id": ["a", "b"],
            "package_path": ["p", "p"],
            "text": ["hello", "there"],
            "blob": pa.array([b"x", b"\x00y"], type=pa.binary()),
        }
    )
    path = tmp_path / "b.parquet"
    pq.write_table(table, path)
    result = CliRunner().invoke(cli, ["--dsn", dsn, "index", "docs", str(path), "--column", "metadata=blob,text"])
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "internal error" not in result.output, result.output
    assert "b.parquet: row 1: metadata.blob: bytes are not JSON; decode or base64 them first" in lines[0]
    assert _count(dsn) == 0


def test_memory_record_metadata_is_mapped_the_same(dsn: str) -> None:
    from ragstore.memory.models import MemoryRecord

    record = MemoryRecord.model_validate(
        {"id": "m1", "agent": "a1", "store": "semantic", "at": AWARE, "content": "x", "metadata": {"day": GIVEN["day"]}}
    )
    assert record.metadata == {"day": "2024-05-01"}
    with pytest.raises(ValueError, match=r"metadata\.blob: bytes are not JSON"):
        MemoryRecord.model_validate(
            {"id": "m1", "agent": "a1", "store": "semantic", "at": AWARE, "content": "x", "metadata": {"blob": b"x"}}
        )


def test_where_refuses_an_integer_beyond_a_float_as_it_refuses_such_a_number(dsn: str, store: Any) -> None:
    runner = CliRunner()
    for number in ("1" + "0" * 400, "1e400"):
        result = runner.invoke(cli, ["--dsn", dsn, "search", "docs", "hello", "--where", f'{{"n": {number}}}'])
        assert result.exit_code != 0, number
        assert len(result.output.strip().splitlines()) == 1 and "--where" in result.output, result.output


def test_a_jsonl_integer_beyond_a_float_in_metadata_is_one_line(dsn: str, store: Any, tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    path.write_text('{"chunk_id": "a", "package_path": "p", "text": "t", "metadata": {"n": 1' + "0" * 400 + "}}\n")
    result = CliRunner().invoke(cli, ["--dsn", dsn, "index", "docs", str(path)])
    assert result.exit_code == 1, result.output
    assert "big.jsonl:1: metadata" in result.output and "401 digits is beyond what a float holds" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert _count(dsn) == 0
