"""The helpers defined once in ragstore.common, and that every former copy now uses them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import click
import numpy as np
import pytest
from pgvector import HalfVector, Vector

from ragstore import context, memory
from ragstore.cli.context import context_pack
from ragstore.cli.eval import eval_command
from ragstore.cli.search import search_command
from ragstore.common.canonical import canonical_bytes, canonical_json
from ragstore.common.files import read_bytes
from ragstore.common.jsonl import MAX_LINE_BYTES, read_lines, read_objects
from ragstore.common.like import like_contains, like_escape, like_prefix
from ragstore.common.stats import p95
from ragstore.errors import InvalidInput, NotFound
from ragstore.evaluation import datasets, runner
from ragstore.ingest import readers
from ragstore.memory import store as memory_store
from ragstore.search import exact, filters, fts, hybrid, recall, vector
from ragstore.search.api import MODES


def test_one_canonical_json_with_the_same_return_type_everywhere() -> None:
    value = {"b": [1, "é"], "a": None}
    assert canonical_json(value) == '{"a":null,"b":[1,"é"]}'
    assert canonical_bytes(value) == '{"a":null,"b":[1,"é"]}'.encode()
    assert memory.canonical_json is context.canonical_json is canonical_json
    assert memory.canonical_json(value) == context.canonical_json(value)
    with pytest.raises(ValueError):
        canonical_json({"x": math.inf})


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_read_lines_skips_blank_lines_drops_a_bom_and_numbers_from_one(tmp_path: Path) -> None:
    path = _write(tmp_path, "a.jsonl", b'\xef\xbb\xbf{"a": 1}\r\n\n   \n{"b": 2}')
    lines = list(read_lines(path, label="a.jsonl"))
    assert [(line.where, line.number, line.text) for line in lines] == [
        ("a.jsonl:1", 1, '{"a": 1}'),
        ("a.jsonl:4", 4, '{"b": 2}'),
    ]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"a": 1}\n{"a": "\xff"}\n', r"x\.jsonl:2: invalid UTF-8 at byte 7"),
        (b'{"a": 1}\n{not json\n', r"x\.jsonl:2: not valid JSON: "),
        (b"[1, 2]\n", r"x\.jsonl:1: expected a JSON object, got list"),
    ],
)
def test_read_objects_names_file_and_line_of_the_first_problem(tmp_path: Path, data: bytes, message: str) -> None:
    path = _write(tmp_path, "x.jsonl", data)
    with pytest.raises(InvalidInput, match=message):
        list(read_objects(path))


def test_read_lines_refuses_an_overlong_line_and_names_missing_files(tmp_path: Path) -> None:
    path = _write(tmp_path, "big.jsonl", b"{}\n" + b" " * (MAX_LINE_BYTES + 1))
    with pytest.raises(InvalidInput, match=r"big\.jsonl:2: line longer than 16 MiB"):
        list(read_lines(path))
    with pytest.raises(NotFound, match="no such file"):
        list(read_lines(tmp_path / "missing.jsonl"))
    with pytest.raises(InvalidInput, match="is a directory"):
        list(read_lines(tmp_path))


def test_memory_import_keeps_a_line_separator_inside_a_json_string(tmp_path: Path) -> None:
    # Only "\n" ends a JSONL line: U+2028 is legal inside a JSON string and must not split the record.
    record = {"agent": "ana", "store": "episodic", "at": "2026-01-01T00:00:00Z", "content": "a\u2028b"}
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    [read] = memory_store.read_jsonl(path)
    assert read.content == "a\u2028b"


def test_every_jsonl_reader_uses_the_one_line_reader() -> None:
    assert readers.read_lines is read_lines
    assert readers.MAX_LINE_BYTES == MAX_LINE_BYTES
    assert memory_store.read_objects is read_objects
    assert datasets.read_objects is read_objects and datasets.read_lines is read_lines


@pytest.mark.parametrize(
    ("text", "escaped"),
    [("plain/dir", "plain/dir"), ("a_b", "a\\_b"), ("50%", "50\\%"), ("c:\\x", "c:\\\\x"), ("\\%_", "\\\\\\%\\_")],
)
def test_like_escape_makes_wildcards_literal(text: str, escaped: str) -> None:
    assert like_escape(text) == escaped
    assert like_prefix(text) == escaped + "%"
    assert like_contains(text) == f"%{escaped}%"


def test_one_like_escape() -> None:
    assert filters.like_prefix is like_prefix
    assert not hasattr(memory_store, "_like_pattern")
    from ragstore.ingest import writer

    assert writer.like_prefix is like_prefix and not hasattr(writer, "_like_prefix")


@pytest.mark.parametrize(
    ("values", "expected"),
    [([], 0.0), ([7.0], 7.0), ([float(v) for v in range(1, 21)], 19.0), ([float(v) for v in range(1, 101)], 95.0)],
)
def test_p95_is_the_nearest_rank(values: list[float], expected: float) -> None:
    assert p95(values) == expected
    assert p95(list(reversed(values))) == expected


def test_one_p95_for_eval_and_check_recall() -> None:
    assert runner.p95 is p95 and recall.p95 is p95


def test_one_modes_tuple_for_search_eval_and_context() -> None:
    def choices(command: click.Command, name: str) -> tuple[str, ...]:
        [option] = [p for p in command.params if p.name == name]
        assert isinstance(option.type, click.Choice)
        return tuple(option.type.choices)

    assert runner.MODES is MODES
    assert choices(search_command, "mode") == MODES
    assert choices(eval_command, "modes") == MODES
    assert choices(context_pack, "mode") == MODES


def test_one_vector_decoder() -> None:
    assert vector.to_float32 is filters.to_float32 is exact.to_float32 is recall.to_float32
    assert not hasattr(fts, "to_vector") and hybrid.row_to_hit is fts.row_to_hit is vector.row_to_hit
    for value in (Vector([1.0, 2.5]), HalfVector([1.0, 2.5]), [1, 2.5], np.array([1.0, 2.5])):
        out = filters.to_float32(value)
        assert out.dtype == np.float32 and out.tolist() == [1.0, 2.5]


def test_one_where_builder() -> None:
    assert not hasattr(fts, "filter_sql")
    flt = filters.Filter(package="docs/", metadata={"lang": "en"})
    rendered = flt.where(extra=filters.sql.SQL("c.tsv @@ m.wide")).as_string(None)
    assert (
        rendered == 'WHERE c.tsv @@ m.wide AND "e".package_path LIKE %(package_like)s AND "e".metadata @> %(metadata)s'
    )


def test_read_bytes_names_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "x.toml").write_bytes(b"default = 1\n")
    assert read_bytes(tmp_path / "x.toml", "budgets file") == b"default = 1\n"
    with pytest.raises(NotFound, match=r"^budgets file not found: .*nope\.toml$"):
        read_bytes(tmp_path / "nope.toml", "budgets file")


def test_context_inputs_that_are_folders_are_one_line_errors(tmp_path: Path) -> None:
    # A folder where a file is expected was an IsADirectoryError traceback for budgets, state and packs.
    from ragstore.context.budget import load_budget_config
    from ragstore.context.sources import load_pack, read_state

    with pytest.raises(NotFound, match="budgets file not found"):
        load_budget_config(tmp_path)
    with pytest.raises(NotFound, match="state file not found"):
        read_state(tmp_path)
    with pytest.raises(NotFound, match="pack file not found"):
        load_pack(tmp_path)
