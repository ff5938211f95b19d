"""Reading eval sets: queries JSONL, qrels as TSV / TREC / BEIR, and errors naming file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragstore.errors import InvalidInput, NotFound
from ragstore.evaluation.datasets import Query, read_qrels, read_queries

DATA = Path(__file__).resolve().parents[1] / "data" / "eval"
MANPAGES = Path("/work/shared/datasets/manpages")


def _write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


# --- queries ----------------------------------------------------------------------------------------


def test_read_queries_in_file_order_skipping_blank_lines_and_extra_keys() -> None:
    queries = read_queries(DATA / "queries.jsonl")
    assert queries == [
        Query(query_id="q1", text="how do I list files"),
        Query(query_id="q2", text="copy a directory recursively"),
        Query(query_id="q3", text="BEIR-style id"),  # from BEIR's "_id"
    ]


def test_read_queries_bad_json_names_file_and_line() -> None:
    with pytest.raises(InvalidInput, match=r"queries_bad_json\.jsonl:3: not valid JSON"):
        read_queries(DATA / "queries_bad_json.jsonl")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('["q1", "text"]', "expected a JSON object, got list"),
        ('{"text": "no id"}', "missing field 'query_id'"),
        ('{"query_id": "q1"}', "missing field 'text'"),
        ('{"query_id": 7, "text": "numeric id"}', "query_id"),
        ('{"query_id": "", "text": "empty id"}', "query_id"),
        ('{"query_id": "q1", "text": "   "}', "text must not be blank"),
    ],
)
def test_read_queries_rejects_bad_records_with_line_number(tmp_path: Path, line: str, message: str) -> None:
    path = _write(tmp_path, "q.jsonl", '{"query_id": "q0", "text": "fine"}\n' + line + "\n")
    with pytest.raises(InvalidInput, match=r"q\.jsonl:2: ") as info:
        read_queries(path)
    assert message in str(info.value)


def test_read_queries_rejects_duplicate_id_naming_both_lines(tmp_path: Path) -> None:
    path = _write(tmp_path, "q.jsonl", '{"query_id": "a", "text": "x"}\n\n{"query_id": "a", "text": "y"}\n')
    with pytest.raises(InvalidInput, match=r"q\.jsonl:3: query_id 'a' already on line 1"):
        read_queries(path)


def test_read_queries_tolerates_bom_and_crlf(tmp_path: Path) -> None:
    path = _write(tmp_path, "q.jsonl", b'\xef\xbb\xbf{"query_id": "a", "text": "x"}\r\n')
    assert read_queries(path) == [Query(query_id="a", text="x")]


def test_read_queries_rejects_invalid_utf8_with_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "q.jsonl", b'{"query_id": "a", "text": "x"}\n{"query_id": "b", "text": "\xff"}\n')
    with pytest.raises(InvalidInput, match=r"q\.jsonl:2: invalid UTF-8 at byte 27"):
        read_queries(path)


def test_missing_file_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match=r"nope\.jsonl"):
        read_queries(tmp_path / "nope.jsonl")
    with pytest.raises(NotFound, match=r"nope\.tsv"):
        read_qrels(tmp_path / "nope.tsv")


# --- qrels ------------------------------------------------------------------------------------------


def test_read_qrels_tab_form_keeps_spaces_in_ids_and_zero_grades() -> None:
    # the repeated (q1, man1/ls.1#0, 2) on the last line is read once
    assert read_qrels(DATA / "qrels.tsv") == {
        "q1": {"man1/ls.1#0": 2, "man1/ls.1#1": 1},
        "q2": {"man1/cp.1#0": 2, "man page with spaces#3": 0},
    }


def test_read_qrels_trec_four_column_form_with_mixed_whitespace_and_negative_grade() -> None:
    assert read_qrels(DATA / "qrels_trec.txt") == {
        "q1": {"man1/ls.1#0": 2, "man1/ls.1#1": 1},
        "q2": {"man1/cp.1#0": 2},
        "q3": {"doc9": -1},
    }


def test_read_qrels_skips_beir_header() -> None:
    assert read_qrels(DATA / "qrels_beir.tsv") == {"q1": {"man1/ls.1#0": 2}, "q2": {"man1/cp.1#0": 1}}


def test_read_qrels_header_only_allowed_on_first_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "r.tsv", "q1\tc1\t1\nquery-id\tcorpus-id\tscore\n")
    with pytest.raises(InvalidInput, match=r"r\.tsv:2: grade must be an integer, got 'score'"):
        read_qrels(path)


def test_read_qrels_bad_grade_names_file_and_line() -> None:
    with pytest.raises(InvalidInput, match=r"qrels_bad_grade\.tsv:2: grade must be an integer, got 'high'"):
        read_qrels(DATA / "qrels_bad_grade.tsv")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("q1\tc1\t1\nq2\tc2\n", r"r\.tsv:2: expected 3 columns .* got 2"),
        ("q1 0 c1 1\nq2 0 c 2 1\n", r"r\.tsv:2: expected 3 columns .* got 5"),
        ("q1\tc1\t1\nq2 0 c2 1\n", r"r\.tsv:2: 4 columns where earlier lines have 3"),
        ("q1\tc1\t1.5\n", r"r\.tsv:1: grade must be an integer, got '1\.5'"),
        ("q1\t\t1\n", r"r\.tsv:1: empty query id or chunk id"),
        ("q1\tc1\t1\n\nq1\tc1\t2\n", r"r\.tsv:3: \('q1', 'c1'\) graded 2 here and 1 on line 1"),
    ],
)
def test_read_qrels_rejects_malformed_lines(tmp_path: Path, content: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        read_qrels(_write(tmp_path, "r.tsv", content))


def test_read_qrels_empty_file_gives_empty_mapping(tmp_path: Path) -> None:
    assert read_qrels(_write(tmp_path, "r.tsv", "\n\n")) == {}


# --- the shared manpages set ------------------------------------------------------------------------


@pytest.mark.skipif(not MANPAGES.is_dir(), reason="shared manpages dataset not present")
def test_smoke_read_manpages_eval_set() -> None:
    queries = read_queries(MANPAGES / "queries.jsonl")
    qrels = read_qrels(MANPAGES / "qrels.tsv")
    assert len(queries) == 1_917
    assert len(qrels) == 1_917
    assert {q.query_id for q in queries} == set(qrels)
    # every query has at least one relevant chunk (grade > 0)
    assert all(any(grade > 0 for grade in judged.values()) for judged in qrels.values())
