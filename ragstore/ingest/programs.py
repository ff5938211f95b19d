"""Records a program hands over (dicts or :class:`ChunkRecord`s), read by the same one pass as a JSONL file.

Each record becomes the JSON line a file would hold, labelled ``record N`` (:func:`record_lines`), inside
one :class:`~ragstore.ingest.readers.Source` of kind ``records`` (:func:`records_source`). So
``Store.index``, ``AsyncStore.index``, the framework adapters and
:func:`ragstore.ingest.run.index_records` share one path with ``ragstore index FILE``: a record whose
bytes are those a stored chunk was written from is unchanged and costs no parsing; every other one is
validated and spooled before anything is written.

The line is made for its source hash (and for pydantic to name a problem); it is not parsed back: each
:class:`~ragstore.ingest.fast.RawLine` also carries the dict the line was dumped from, which the pass
reads directly (:func:`ragstore.ingest.fast.direct_record`) with the checks it applies to a parsed line.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import ValidationError

from ragstore.common.jsonvalue import json_metadata
from ragstore.errors import InvalidInput
from ragstore.ingest.records import ChunkRecord

if TYPE_CHECKING:
    from ragstore.ingest.fast import RawLine
    from ragstore.ingest.readers import Source


def record_from(item: ChunkRecord | Mapping[str, Any], where: str) -> ChunkRecord:
    """``item`` as a validated ChunkRecord; InvalidInput naming ``where`` and the field otherwise."""
    from ragstore.ingest.records import describe_record_error

    if isinstance(item, ChunkRecord):
        return item
    if not isinstance(item, Mapping):
        raise InvalidInput(f"{where}: a record must be a dict or a ChunkRecord, got {type(item).__name__}")
    try:
        return ChunkRecord.model_validate(dict(item))
    except ValidationError as exc:
        raise InvalidInput(f"{where}: {describe_record_error(exc)}") from exc


def record_lines(records: Iterable[ChunkRecord | Mapping[str, Any]]) -> Iterator[RawLine]:
    """Each record (a dict or a ChunkRecord) as the JSON line a JSONL file would hold, labelled ``record N``:
    the one pass then validates it, and skips it unparsed when a stored chunk was written from the same
    bytes (a re-index of unchanged records). A value JSON cannot hold (a set, an object) is InvalidInput
    naming the record and the field. Refuses a single record given in place of an iterable, at once."""
    if isinstance(records, Mapping | ChunkRecord | str | bytes):
        raise InvalidInput("records must be an iterable of records (dicts or ChunkRecords), not a single record")
    return _record_lines(records)


def records_source(records: Iterable[ChunkRecord | Mapping[str, Any]]) -> Source:
    """The records as one source of kind ``records`` for :func:`ragstore.ingest.run.index_sources`."""
    return lines_source(record_lines(records))


def named_records_source(pairs: Iterable[tuple[str, ChunkRecord]]) -> Source:
    """``(where, record)`` pairs as one source of kind ``records``, each record named ``where`` in messages."""
    return lines_source(_named_lines(pairs))


def lines_source(lines: Iterator[RawLine]) -> Source:
    from ragstore.ingest.readers import Source

    return Source("records", None, kind="records", lines=lines)


def _named_lines(pairs: Iterable[tuple[str, ChunkRecord]]) -> Iterator[RawLine]:
    from ragstore.ingest.fast import RawLine

    for where, record in pairs:
        data, fields = _line(record, where)
        yield RawLine(where, data, fields)


def _record_lines(records: Iterable[ChunkRecord | Mapping[str, Any]]) -> Iterator[RawLine]:
    from ragstore.ingest.fast import RawLine

    for i, item in enumerate(records, 1):
        where = f"record {i}"
        data, fields = _line(item, where)
        yield RawLine(where, data, fields)


def _line(item: ChunkRecord | Mapping[str, Any], where: str) -> tuple[bytes, dict[str, Any] | None]:
    """``item`` as the JSON line a file would hold, with the dict orjson made it from (None when the line is
    pydantic's: the pass then parses it); InvalidInput naming ``where`` for what is no record."""
    import orjson

    if isinstance(item, ChunkRecord):
        fields = item.model_dump(exclude_none=True)
        fields["metadata"] = json_metadata(item.metadata, f"{where}: metadata")
        return orjson.dumps(fields, option=orjson.OPT_SERIALIZE_NUMPY), fields
    if not isinstance(item, Mapping):
        record_from(item, where)  # names what it is
    item = dict(item)
    if item.get("metadata") is not None:  # values JSON does not have: mapped or refused, once
        item["metadata"] = json_metadata(item["metadata"], f"{where}: metadata")
    try:
        line = orjson.dumps(item, option=orjson.OPT_SERIALIZE_NUMPY)
    except TypeError:  # not JSON as given: pydantic names the field, or reads it (a tuple, a float32)
        return record_from(item, where).model_dump_json(exclude_none=True).encode(), None
    # The pass reads the dict a batch later: the vector as it was when the line was made (a program may
    # fill one buffer for every record it yields).
    vector = item.get("vector")
    if type(vector) is list:
        item["vector"] = list(vector)
    elif isinstance(vector, np.ndarray):
        item["vector"] = vector.copy()
    return line, item
