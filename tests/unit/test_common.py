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
from ragstore.search import exact, fts, hybrid, recall, request, vector
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
    assert request.like_prefix is like_prefix
    from ragstore.ingest import writer

    assert writer.like_prefix is like_prefix


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
    assert request.to_float32 is exact.to_float32 is recall.to_float32
    assert hybrid.row_to_hit is fts.row_to_hit is vector.row_to_hit is request.row_to_hit
    for value in (Vector([1.0, 2.5]), HalfVector([1.0, 2.5]), [1, 2.5], np.array([1.0, 2.5])):
        out = request.to_float32(value)
        assert out.dtype == np.float32 and out.tolist() == [1.0, 2.5]


def test_one_where_builder() -> None:
    flt = request.Filter(package="docs/", metadata={"lang": "en"})
    rendered = flt.where(extra=request.sql.SQL("c.tsv @@ m.wide")).as_string(None)
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


# --- fields_dict, Closing, EndpointOptions, check_aware ---------------------------------------------------


def test_fields_dict_keeps_declaration_order_and_applies_overrides_and_a_selection() -> None:
    import dataclasses
    from datetime import UTC, datetime

    from ragstore.common.fields import fields_dict

    @dataclasses.dataclass(frozen=True, slots=True)
    class Row:
        b: int
        a: str
        at: datetime

    row = Row(2, "x", datetime(2026, 1, 2, tzinfo=UTC))
    assert list(fields_dict(row).items()) == [("b", 2), ("a", "x"), ("at", row.at)]
    assert fields_dict(row, at="2026-01-02") == {"b": 2, "a": "x", "at": "2026-01-02"}
    assert list(fields_dict(row, "a", "b")) == ["b", "a"]  # declaration order, not the order asked
    with pytest.raises(ValueError, match="Row has no field c"):
        fields_dict(row, c=1)
    with pytest.raises(TypeError, match="not a dataclass instance"):
        fields_dict(Row)


def test_memory_results_keep_their_json_form() -> None:
    from datetime import UTC, datetime

    from ragstore.memory.bundle import ReadFailure, Rejection
    from ragstore.memory.models import Store
    from ragstore.memory.principals import Principal

    at = datetime(2026, 3, 4, 5, 6, 7, 8, tzinfo=UTC)
    assert Principal("ana", "r", "owner", at, True).to_dict() == {
        "agent": "ana",
        "role": "r",
        "granted_by": "owner",
        "granted_at": "2026-03-04T05:06:07.000008Z",
        "role_exists": True,
    }
    assert memory_store.ForgetResult(1, "ana", "semantic", "x", "why", "me", "r", at).to_dict()["forgotten_at"] == (
        "2026-03-04T05:06:07.000008Z"
    )
    failure = ReadFailure(Store.EPISODIC, "OSError", "gone").to_dict()
    assert failure == {"store": "episodic", "error": "OSError", "message": "gone"}
    assert type(failure["store"]) is str
    assert Rejection(Store.SEMANTIC, "other_agent", 2).to_dict() == {
        "store": "semantic",
        "reason": "other_agent",
        "count": 2,
    }


def test_closing_closes_at_the_end_of_the_block_even_on_an_exception() -> None:
    from ragstore.common.closing import Closing

    class Resource(Closing):
        closed = 0

        def close(self) -> None:
            self.closed += 1

    resource = Resource()
    with resource as inside:
        assert inside is resource and resource.closed == 0
    assert resource.closed == 1
    with pytest.raises(KeyError), resource:
        raise KeyError("boom")
    assert resource.closed == 2


def test_every_http_client_refuses_an_option_it_does_not_know() -> None:
    from ragstore.common.http import JsonEndpoint
    from ragstore.families import make_backend
    from ragstore.search.hyde import Hyde
    from ragstore.search.rerank import HttpReranker

    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        JsonEndpoint("http://127.0.0.1:9/x", what="test", colour=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="colour"):
        HttpReranker("http://127.0.0.1:9", colour=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="colour"):
        Hyde("http://127.0.0.1:9/v1", "m", colour=1)  # type: ignore[call-arg]
    with pytest.raises(InvalidInput, match=r"bad option for the openai backend: .*colour"):
        make_backend("openai", model="m", base_url="http://127.0.0.1:9/v1", colour=1)


def test_http_clients_keep_their_own_defaults() -> None:
    from ragstore.embed.openai import OpenAIBackend
    from ragstore.search.hyde import Hyde
    from ragstore.search.rerank import HttpReranker

    with OpenAIBackend("http://127.0.0.1:9/v1", "m", dim=4) as backend:
        assert backend._endpoint._max_retries == 5
    with Hyde("http://127.0.0.1:9/v1", "m") as hyde:
        assert hyde._http._max_retries == 2 and repr(hyde).startswith("Hyde(url='http://127.0.0.1:9/v1/chat/")
    with HttpReranker("http://127.0.0.1:9", max_retries=0) as reranker:
        assert reranker._http._max_retries == 0
        assert repr(reranker) == (
            "HttpReranker(url='http://127.0.0.1:9/rerank', model=None, api='cohere', "
            "http=JsonEndpoint(url='http://127.0.0.1:9/rerank', api_key=None))"
        )


def test_check_aware_is_the_one_timezone_rule() -> None:
    from datetime import UTC, datetime

    from ragstore.common.moments import check_aware

    aware = datetime(2026, 1, 1, tzinfo=UTC)
    assert check_aware("now", aware) is aware
    with pytest.raises(InvalidInput, match=r"^now must be timezone-aware, .* needs a timezone, e\.g\. 2026"):
        check_aware("now", datetime(2026, 1, 1))
    with pytest.raises(InvalidInput, match="now must be a datetime"):
        check_aware("now", "2026-01-01")
