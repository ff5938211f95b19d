"""Read evaluation sets: queries (JSONL) and graded relevance judgements (qrels, TSV or TREC/BEIR).

Formats:

- **queries**: JSON Lines, one object per line, ``{"query_id": "...", "text": "..."}``. Other keys are
  ignored; BEIR's ``_id`` is accepted in place of ``query_id``. Both must be strings; the text must not be
  blank; a query_id appears once per file.
- **qrels**, one judgement per line, in either form:

  - ``query_id<TAB>chunk_id<TAB>grade`` (ragstore's own; ids may contain spaces since only tabs split);
  - ``qid iteration docid grade``, the TREC 4-column form, whitespace separated; the iteration column
    (usually ``0``) is ignored.

  A line is split on tabs when that gives 3 or 4 columns, else on runs of whitespace.

  The first line may be a header, ``query-id corpus-id score`` (as BEIR's ``qrels/*.tsv``) or
  ``query_id chunk_id grade``, and is skipped. Grades are integers; negatives are allowed (TREC uses them
  for "harmful") and count as not relevant in the metrics. Every data line of one file has the same number
  of columns. A (query, chunk) pair repeated with the same grade is read once; with another grade it is
  an error.

Blank lines are skipped in both files, a UTF-8 byte order mark is tolerated, and files are read as a
stream (a line at a time). Every error names the file and the 1-based line number.
"""

from __future__ import annotations

import os

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, StrictStr, ValidationError

from ragstore.common.jsonl import read_lines, read_objects
from ragstore.common.problems import first_problem
from ragstore.errors import InvalidInput

__all__ = ["Qrels", "Query", "read_qrels", "read_queries"]

Qrels = dict[str, dict[str, int]]
"""query_id -> chunk_id -> grade."""

_HEADERS = {("query-id", "corpus-id", "score"), ("query_id", "chunk_id", "grade")}


class Query(BaseModel):
    """One evaluation query: its id and its text."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    query_id: StrictStr = Field(min_length=1, validation_alias=AliasChoices("query_id", "_id"))
    text: StrictStr = Field(pattern=r"\S")


def read_queries(path: str | os.PathLike[str]) -> list[Query]:
    """Read a queries JSONL file into :class:`Query` objects, in file order.

    Raises :class:`~ragstore.errors.NotFound` when the file does not exist, and
    :class:`~ragstore.errors.InvalidInput` (naming the file and line) for a line that is not UTF-8 or not
    a JSON object, a missing, non-string or empty ``query_id``, a missing, non-string or blank ``text``,
    or a ``query_id`` seen on an earlier line.
    """
    queries: list[Query] = []
    first_line: dict[str, int] = {}
    for (where, lineno, _text), record in read_objects(path):
        try:
            query = Query.model_validate(record)
        except ValidationError as exc:
            raise InvalidInput(f"{where}: {_describe(exc)}") from exc
        if query.query_id in first_line:
            raise InvalidInput(f"{where}: query_id {query.query_id!r} already on line {first_line[query.query_id]}")
        first_line[query.query_id] = lineno
        queries.append(query)
    return queries


def read_qrels(path: str | os.PathLike[str]) -> Qrels:
    """Read a qrels file (3-column TSV or TREC/BEIR 4-column) into ``{query_id: {chunk_id: grade}}``.

    Queries appear in file order, and each query's chunks in file order. Raises
    :class:`~ragstore.errors.NotFound` when the file does not exist, and
    :class:`~ragstore.errors.InvalidInput` (naming the file and line) for a line that is not UTF-8, has
    neither 3 nor 4 columns or another column count than the first data line, has an empty id, a grade
    that is not an integer, or repeats a (query, chunk) pair with a different grade.
    """
    qrels: Qrels = {}
    seen_on: dict[tuple[str, str], int] = {}
    width: int | None = None
    first_content = True
    for where, lineno, line in read_lines(path):
        fields = [f.strip() for f in line.split("\t")]
        if len(fields) not in (3, 4):  # not tab-separated (or mixed tabs and spaces): split on whitespace
            fields = line.split()
        if first_content:
            first_content = False
            if tuple(f.lower() for f in fields) in _HEADERS:
                continue
        if len(fields) not in (3, 4):
            raise InvalidInput(
                f"{where}: expected 3 columns (query_id, chunk_id, grade) or 4 (qid 0 docid grade), got {len(fields)}"
            )
        if width is None:
            width = len(fields)
        elif len(fields) != width:
            raise InvalidInput(f"{where}: {len(fields)} columns where earlier lines have {width}")
        # 3 columns: query_id chunk_id grade; 4 columns: qid iteration docid grade
        query_id, chunk_id, grade_text = fields[0], fields[-2], fields[-1]
        if not query_id or not chunk_id:
            raise InvalidInput(f"{where}: empty query id or chunk id")
        try:
            grade = int(grade_text)
        except ValueError as exc:
            raise InvalidInput(f"{where}: grade must be an integer, got {grade_text!r}") from exc
        judged = qrels.setdefault(query_id, {})
        previous = judged.get(chunk_id)
        if previous is not None and previous != grade:
            raise InvalidInput(
                f"{where}: ({query_id!r}, {chunk_id!r}) graded {grade} here and {previous}"
                f" on line {seen_on[query_id, chunk_id]}"
            )
        if previous is None:
            seen_on[query_id, chunk_id] = lineno
            judged[chunk_id] = grade
    return qrels


def _describe(exc: ValidationError) -> str:
    """The first validation problem as ``field: message`` (one line, for the CLI)."""
    problem = first_problem(exc)
    if problem.type == "missing":
        return f"missing field {problem.field!r}"
    if problem.type == "string_pattern_mismatch":
        return f"{problem.field} must not be blank"
    return f"{problem.field}: {problem.message} (got {problem.input!r})"
