"""The records of the write path, validated at the edge with pydantic.

- :class:`ChunkRecord` is one line of a chunks.jsonl file (or one chunk of a document):
  ``{chunk_id, package_path, text, metadata?}``, optionally with a precomputed ``vector`` (and the
  ``model`` that made it) for users who embed elsewhere.
- :class:`IndexRow` is what a family table holds for a chunk: ``{chunk_id, package_path, vector, dim,
  model}``, with no timestamp, so the same chunk always yields the same row.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Annotated, Any

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from ragstore.common.text import text_problem
from ragstore.embed.base import Matrix
from ragstore.errors import InvalidInput, ModelMismatch

MAX_ID_CHARS = 1024
# chunk_id and package_path are keys of btree indexes, whose entries PostgreSQL caps at 2,704 bytes
# (a third of a page); with the family name (at most 48 bytes) and the entry's headers, 2,048 bytes of
# UTF-8 always fit, uncompressed.
MAX_ID_BYTES = 2048
MAX_TEXT_CHARS = 4 * 1024 * 1024
# PostgreSQL's tsvector holds at most 1 MB (1,048,575 bytes) of lexemes and positions. A text of up to
# FTS_SAFE_BYTES of UTF-8 stays far below it whatever its words (measured: 3 MB of distinct words make a
# 4.4 MB tsvector, 1.5x; hyphenated compounds add their parts, at most a few times the text); a longer
# text has its tsvector computed by the database in the validation pass (ragstore.ingest.run).
FTS_SAFE_BYTES = 128 * 1024
# 310 digits in a row: perhaps an integer beyond a float (about 1.8e308), looked at closely.
_LONG_DIGITS = re.compile(r"\d{310}")

Identifier = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS)]


def _storable(value: str) -> str:
    """``value``, or ValueError naming what PostgreSQL text cannot hold (:func:`text_problem`); the error
    names the field before it (``file:line: text: holds a NUL character ...``)."""
    problem = text_problem(value)
    if problem is not None:
        raise ValueError(f"holds {problem}")
    return value


def _texts(value: Any) -> list[str]:
    """Every string in a JSON value (its keys too), in no particular order, without recursion."""
    out: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            out.extend(key for key in item if isinstance(key, str))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return out


class ChunkRecord(BaseModel):
    """One chunk to index. Unknown fields are refused so that a typo is not silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    chunk_id: Identifier
    package_path: Identifier
    text: Annotated[str, StringConstraints(max_length=MAX_TEXT_CHARS)]
    metadata: dict[str, Any] = Field(default_factory=dict)
    vector: list[float] | None = None
    model: str | None = None

    @field_validator("chunk_id", "package_path", "text")
    @classmethod
    def _text_is_storable(cls, value: str) -> str:
        return _storable(value)

    @field_validator("chunk_id", "package_path")
    @classmethod
    def _not_blank(cls, value: str, info: Any) -> str:
        if not value.strip():
            raise ValueError(f"{info.field_name} is blank")
        size = len(value.encode("utf-8"))
        if size > MAX_ID_BYTES:
            raise ValueError(
                f"{info.field_name} is {size:,} bytes of UTF-8, over the limit of {MAX_ID_BYTES} "
                "(it is a key of a database index)"
            )
        return value

    @field_validator("metadata", mode="before")
    @classmethod
    def _metadata_or_null(cls, value: Any) -> Any:
        return {} if value is None else value

    @field_validator("metadata")
    @classmethod
    def _metadata_is_storable(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            encoded = json.dumps(value, ensure_ascii=False, allow_nan=False)
        except ValueError as exc:
            raise ValueError("metadata holds NaN or Infinity, which JSON (and jsonb) cannot store") from exc
        # The decoded texts, keys and values: a real NUL character is refused, the six characters \u0000
        # written as text (JSON "\\u0000") are stored as they are.
        for text in _texts(value):
            _storable(text)
        if _LONG_DIGITS.search(encoded):  # perhaps an integer beyond a float: refused as such a number is
            from ragstore.common.strictjson import check_json_value

            check_json_value(value, "metadata")
        return value

    @field_validator("vector")
    @classmethod
    def _vector_is_finite(cls, value: list[float] | None) -> list[float] | None:
        if value is not None:
            if not value:
                raise ValueError("vector is empty")
            bad = next((i for i, x in enumerate(value) if not math.isfinite(x) or abs(x) > 3.4e38), None)
            if bad is not None:
                raise ValueError(f"vector[{bad}] is {value[bad]!r}: vectors hold finite float32 values")
        return value

    @model_validator(mode="after")
    def _model_needs_vector(self) -> ChunkRecord:
        if self.model is not None and self.vector is None:
            raise ValueError("model is given without a vector")
        return self

    @property
    def is_blank(self) -> bool:
        """Empty or whitespace-only text: skipped and counted, never embedded."""
        return not self.text.strip()

    def content_sha256(self) -> bytes:
        return content_sha256(self.text)

    def record_sha256(self, fts_config: str) -> bytes:
        """Covers everything stored in the chunk table, so equal hashes mean a no-op."""
        return record_sha256(self.package_path, self.text, self.metadata, fts_config)


def content_sha256(text: str) -> bytes:
    """The hash of a chunk's text: what its vector was made from."""
    return hashlib.sha256(text.encode("utf-8")).digest()


def record_sha256(package_path: str, text: str, metadata: dict[str, Any], fts_config: str) -> bytes:
    """The hash of everything a chunk row stores (:meth:`ChunkRecord.record_sha256`)."""
    canonical = json.dumps(
        [package_path, text, metadata, fts_config], ensure_ascii=False, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode("utf-8")).digest()


class IndexRow(BaseModel):
    """One row of a family table. ``vector`` has exactly ``dim`` finite float32 values."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    chunk_id: Identifier
    package_path: Identifier
    vector: list[float]
    dim: int = Field(gt=0)
    model: Annotated[str, StringConstraints(min_length=1)]

    @model_validator(mode="after")
    def _vector_matches_dim(self) -> IndexRow:
        if len(self.vector) != self.dim:
            raise ValueError(f"vector has {len(self.vector)} dimensions, the family has {self.dim}")
        if not all(math.isfinite(x) and abs(x) <= 3.4e38 for x in self.vector):
            raise ValueError("vector holds NaN, Infinity or a value out of float32 range")
        return self


def check_matrix(matrix: Matrix, *, rows: int, dim: int, model: str, where: str) -> None:
    """The IndexRow contract for a whole batch at once (shape, dtype, finiteness) — vectorised.

    Raises ModelMismatch for a wrong dimension, InvalidInput for non-finite values.
    """
    if matrix.ndim != 2 or matrix.shape[0] != rows:
        raise InvalidInput(f"{where}: the backend returned {matrix.shape} for {rows} texts")
    if matrix.shape[1] != dim:
        raise ModelMismatch(f"{where}: {model} returned {matrix.shape[1]}-d vectors, the family is {dim}-d")
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        raise InvalidInput(f"{where}: vector #{int(np.argmin(finite))} holds NaN or Infinity")


def slow_record(where: str, text: str) -> ChunkRecord:
    """The pydantic reading of one JSONL line: the record, or InvalidInput naming the line and the field
    (``not a JSON object`` when the line is not one)."""
    from ragstore.common.problems import describe_validation_error

    try:
        return ChunkRecord.model_validate_json(text)
    except ValidationError as exc:
        kinds = {e["type"] for e in exc.errors()}
        if kinds & {"json_invalid", "json_type", "model_type"}:
            raise InvalidInput(f"{where}: not a JSON object: {describe_validation_error(exc)}") from exc
        raise InvalidInput(f"{where}: {describe_record_error(exc)}") from exc


def describe_record_error(exc: ValidationError) -> str:
    """Every problem of a record that is not a ChunkRecord, on one line, with a hint when its unknown fields
    are another tool's names for ChunkRecord's fields (:func:`foreign_shape_hint`)."""
    from ragstore.common.problems import describe_validation_error

    extra = [e["loc"][0] for e in exc.errors() if e["type"] == "extra_forbidden" and e["loc"]]
    return describe_validation_error(exc) + foreign_shape_hint(extra)


# Field names of other tools' document records (LangChain's Document, LlamaIndex's TextNode and Document,
# and common exports), with the ChunkRecord field each one corresponds to.
_FOREIGN_FIELDS = {
    "id": "chunk_id",
    "id_": "chunk_id",
    "doc_id": "chunk_id",
    "node_id": "chunk_id",
    "page_content": "text",
    "content": "text",
    "body": "text",
    "source": "package_path",
    "path": "package_path",
    "file_path": "package_path",
    "embedding": "vector",
}


def foreign_shape_hint(extra: list[Any]) -> str:
    """A hint (``" (hint: ...)"``) when the unknown fields of a record are another tool's names for
    ChunkRecord's fields (``{"id", "content", "source"}``: LangChain's or LlamaIndex's shape), else ``""``."""
    known = [(name, _FOREIGN_FIELDS[name]) for name in extra if isinstance(name, str) and name in _FOREIGN_FIELDS]
    if not known:
        return ""
    renames = ", ".join(f"{name} -> {ours}" for name, ours in known)
    return (
        f" (hint: this looks like a LangChain or LlamaIndex record; ragstore reads chunk_id, package_path and "
        f"text, with optional metadata, vector and model: rename {renames})"
    )
