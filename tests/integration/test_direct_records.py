"""Records a program hands over are read from their dicts, not from their JSON lines parsed back: the same
rows, the same source hashes (an unchanged re-run is found unchanged whichever way its rows were written)
and the same message for every bad record as when the lines are parsed."""

import math

import numpy as np
import orjson
import pytest

from ragstore import families
from ragstore.embed.external import ExternalBackend
from ragstore.errors import InvalidInput, ModelMismatch
from ragstore.ingest import fast, writer
from ragstore.ingest.fast import RawLine
from ragstore.ingest.programs import lines_source, record_lines
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_records, index_sources
from tests.toolkit.ingest_paths import DIM, content, rows


@pytest.fixture
def two(conn):
    for name in ("a", "b"):
        families.create_family(conn, name, ExternalBackend("mine", DIM), options={"dimensions": DIM})


def parsed_lines(records):
    """The records as today's lines without their dicts: the pass parses every line."""
    return lines_source(RawLine(line.where, line.data) for line in record_lines(records))


def count_reads(monkeypatch) -> dict[str, int]:
    calls = {"direct": 0, "line": 0}
    direct, line = fast.direct_record, fast.fast_record

    def counting_direct(obj):
        calls["direct"] += 1
        return direct(obj)

    def counting_line(data):
        calls["line"] += 1
        return line(data)

    monkeypatch.setattr(fast, "direct_record", counting_direct)
    monkeypatch.setattr(fast, "fast_record", counting_line)
    return calls


def test_records_read_directly_store_what_their_parsed_lines_store(conn, two, monkeypatch):
    records = rows(30)
    records[3]["vector"] = np.asarray(records[3]["vector"], dtype=np.float32)
    records[4]["metadata"] = None
    records[5]["model"] = "mine"
    calls = count_reads(monkeypatch)
    first = index_records(conn, "a", records)
    assert first.inserted == 30 and calls == {"direct": 30, "line": 0}
    assert index_sources(conn, "b", [parsed_lines(records)]).inserted == 30
    assert content(conn, "a") == content(conn, "b") and len(content(conn, "a")) == 30


def test_an_unchanged_rerun_is_found_by_its_hashes_whichever_way_its_rows_were_written(
    conn, two, tmp_path, monkeypatch
):
    records = rows(40)
    src = tmp_path / "v.jsonl"  # the lines a program's records make: a file the pass parses line by line
    src.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    monkeypatch.setattr(writer, "BULK_THRESHOLD", 10)  # the first loads are streamed bulk loads
    assert index_sources(conn, "a", open_sources([str(src)]), batch_size=16).inserted == 40
    assert index_records(conn, "b", records).inserted == 40
    calls = count_reads(monkeypatch)
    again_a = index_records(conn, "a", records)  # rows written from parsed lines, re-run read directly
    again_b = index_sources(conn, "b", open_sources([str(src)]))  # rows written directly, re-run parsed
    for again in (again_a, again_b):
        assert (again.inserted, again.updated, again.unchanged) == (0, 0, 40)
    assert calls == {"direct": 0, "line": 0}  # every record found by its source hash, none read
    changed = [r | {"text": "new"} if i == 7 else r for i, r in enumerate(records)]
    assert index_records(conn, "a", changed).updated == 1 and calls == {"direct": 1, "line": 0}


def test_a_reused_vector_buffer_gives_each_record_its_own_vector(conn, two):
    wanted = rows(12)
    buffer = [0.0] * DIM
    array = np.zeros(DIM, dtype=np.float32)

    def generated():
        for i, r in enumerate(wanted):
            target = buffer if i % 2 else array
            target[:] = r["vector"]
            yield r | {"vector": target}

    index_records(conn, "a", generated())
    index_records(conn, "b", wanted)
    assert content(conn, "a") == content(conn, "b")


def bad(i: int, **changes):
    record = rows(6, seed=3)[i] | {"chunk_id": f"bad{i}"}
    record.update(changes)
    return record


NAN = [math.nan] + [0.5] * (DIM - 1)
CASES = {
    "NaN": {2: {"vector": NAN}},
    "NaN in numpy": {2: {"vector": np.asarray(NAN, dtype=np.float32)}},
    "infinity": {2: {"vector": [math.inf] * DIM}},
    "past float32": {2: {"vector": [1e39] * DIM}},
    "a boolean": {2: {"vector": [True] + [0.5] * (DIM - 1)}},
    "a boolean worth 0": {2: {"vector": [False] + [0.5] * (DIM - 1)}},
    "a None": {2: {"vector": [None] + [0.5] * (DIM - 1)}},
    "a text": {2: {"vector": ["0.5"] * DIM}},
    "nested": {2: {"vector": [[0.5]] * DIM}},
    "too short": {2: {"vector": [0.5, 0.5]}},
    "too short in numpy": {2: {"vector": np.ones(2, dtype=np.float32)}},
    "empty": {2: {"vector": []}},
    "another model": {2: {"model": "other"}},
    "a model without a vector": {2: {"model": "mine", "vector": None}},
    "no vector": {2: {"vector": None}},
    "NUL in the text": {2: {"text": "a\x00b"}},
    "an unknown field": {2: {"colour": "red"}},
    "a number as id": {2: {"chunk_id": 5}},
    "two problems, the vector first": {1: {"vector": [1e39] * DIM}, 4: {"vector": NAN}},
    "two problems, a None after a float32 overflow": {1: {"vector": [1e39] * DIM}, 3: {"vector": [None] * DIM}},
    "two problems, a field first": {1: {"chunk_id": 5}, 4: {"vector": NAN}},
    "two problems, a wrong dimension after a boolean": {1: {"vector": [True] * DIM}, 3: {"vector": [0.5]}},
}


@pytest.mark.parametrize("name", list(CASES))
def test_every_bad_record_is_named_as_its_parsed_line_names_it(conn, two, name):
    records = [bad(i, **CASES[name].get(i, {})) for i in range(6)]
    with pytest.raises((InvalidInput, ModelMismatch)) as direct:
        index_records(conn, "a", records)
    conn.rollback()
    with pytest.raises((InvalidInput, ModelMismatch)) as parsed:  # the same family: messages name it
        index_sources(conn, "a", [parsed_lines(records)])
    conn.rollback()
    assert (type(direct.value), str(direct.value)) == (type(parsed.value), str(parsed.value))
    assert str(direct.value).startswith("record ")
    assert conn.execute("SELECT count(*) FROM ragstore.chunks").fetchone()[0] == 0
