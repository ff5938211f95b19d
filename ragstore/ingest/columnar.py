"""Columnar inputs: Parquet files, and NumPy ``.npy`` matrices with a JSONL sidecar.

**Parquet** (``*.parquet``, needs pyarrow: ``pip install 'ragstore[parquet]'``) is read in record batches.
Its columns are, by default, named like the record's fields: ``chunk_id``, ``package_path``, ``text``,
``vector`` (a fixed-size list or a list of float32/float64; without it the family's backend embeds the
texts), ``metadata`` (a JSON object as a string,
optional) and ``model`` (optional). ``--column FIELD=NAME`` maps a field to another column;
``--column metadata=a,b`` builds each record's metadata from columns ``a`` and ``b``.

**NumPy**: ``X.npy`` holds a 2-D float32/float64 matrix (read memory-mapped), and ``X.jsonl`` next to it
the records without their vectors, line *i* for row *i*.

Vectors never become Python floats: each batch's vector column is one numpy matrix, checked at once
(dimension, nulls, finite float32 values). A record's source hash covers its id, package, text,
metadata and vector bytes. Every problem is one InvalidInput naming the file, the row and the field.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
from pydantic import ValidationError

from ragstore.common.jsonvalue import json_metadata
from ragstore.common.problems import describe_validation_error
from ragstore.errors import InvalidInput, ModelMismatch
from ragstore.ingest.records import ChunkRecord

if TYPE_CHECKING:
    from ragstore.ingest.fast import Known, OnePass, _Parsed
    from ragstore.ingest.readers import Source

COLUMNAR_KINDS = ("parquet", "npy")
FIELDS = ("chunk_id", "package_path", "text", "vector", "metadata", "model")


def parse_columns(specs: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``("text=body", "metadata=a,b")`` → ``{"text": "body", "metadata": "a,b"}``; InvalidInput otherwise."""
    mapping: dict[str, str] = {}
    for spec in specs:
        name, sep, column = spec.partition("=")
        if not sep or not column or name not in FIELDS:
            raise InvalidInput(f"--column {spec!r}: expected FIELD=COLUMN with FIELD one of {', '.join(FIELDS)}")
        mapping[name] = column
    return mapping


def read_columnar(source: Source, one: OnePass) -> None:
    assert source.path is not None
    if source.kind == "parquet":
        _read_parquet(source.path, source.label, source.columns, one)
    else:
        _read_npy(source.path, source.label, one)


def _record(where: str, fields: dict[str, Any]) -> ChunkRecord:
    """The record of one row, checked by the same model as a JSONL line (so the same messages)."""
    try:
        return ChunkRecord(**fields)
    except ValidationError as exc:
        raise InvalidInput(f"{where}: {describe_validation_error(exc)}") from exc


def _source_hash(key: bytes, record: ChunkRecord, metadata: str, vector: bytes) -> bytes:
    digest = hashlib.sha256(key)
    for part in (record.chunk_id, record.package_path, record.text, metadata):
        encoded = part.encode("utf-8")
        digest.update(len(encoded).to_bytes(8, "little"))
        digest.update(encoded)
    digest.update(vector)
    return digest.digest()


def _emit(
    one: OnePass,
    rows: list[tuple[str, ChunkRecord, str, str | None]],
    matrix: np.ndarray | None,
) -> None:
    """Hash the batch's rows, look the hashes up, hand the new ones (with their vector rows) to the pass."""
    from ragstore.ingest.fast import _Parsed

    f32 = None if matrix is None else np.ascontiguousarray(matrix, dtype=np.float32)
    hashes = [
        _source_hash(one.key, record, meta, b"" if f32 is None else f32[i].tobytes())
        for i, (_, record, meta, _) in enumerate(rows)
    ]
    known = one.lookup(hashes)
    parsed: list[_Parsed | tuple[str, str]] = []
    for i, (where, record, _meta, model) in enumerate(rows):
        hit = known.get(hashes[i])
        vector = None if f32 is None else f32[i]
        parsed.append(hit if hit is not None else _Parsed.of(where, record, hashes[i], vector, model))
    one.columnar(parsed)


def _check_matrix(where_of: Any, matrix: np.ndarray, dim: int, family: str) -> None:
    if matrix.shape[1] != dim:
        raise ModelMismatch(f"{where_of(0)}: vector: {matrix.shape[1]} dimensions, family {family!r} is {dim}-d")
    good = np.isfinite(matrix) & (np.abs(matrix) <= 3.4e38)
    if not good.all():
        row, col = (int(x) for x in np.argwhere(~good)[0])
        raise InvalidInput(
            f"{where_of(row)}: vector[{col}] is {float(matrix[row, col])!r}: vectors hold finite float32 values"
        )


# -- Parquet -----------------------------------------------------------------------------------------------


def _parquet_batches(path: Path, label: str, columns: list[str], size: int) -> Iterator[Any]:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise InvalidInput(f"{label}: reading Parquet needs pyarrow: pip install 'ragstore[parquet]'") from exc
    try:
        # Without pre-buffering: a pre-buffered reader holds the bytes of the row groups it will read until it
        # is closed, so its memory grows with the file (measured: the whole file's bytes).
        handle = pq.ParquetFile(path, pre_buffer=False)
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for a file that is not Parquet
        raise InvalidInput(f"{label}: not a readable Parquet file: {exc}") from exc
    names = set(handle.schema_arrow.names)
    missing = [c for c in columns if c not in names]
    if missing:
        raise InvalidInput(
            f"{label}: no column {', '.join(missing)} (columns: {', '.join(sorted(names))}); "
            "map fields to columns with --column FIELD=NAME"
        )
    batches = handle.iter_batches(batch_size=size, columns=columns)
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except Exception as exc:
            raise InvalidInput(f"{label}: corrupt Parquet data: {exc}") from exc
        yield batch


def _vector_matrix(column: Any, label: str, first_row: int, dim: int, family: str) -> np.ndarray:
    import pyarrow as pa

    def where(i: int) -> str:
        return f"{label}: row {first_row + i + 1}"

    if column.null_count:
        bad = int(np.flatnonzero(np.asarray(column.is_null()))[0])
        raise InvalidInput(f"{where(bad)}: vector: null (every record of this input needs its vector)")
    kind = column.type
    if pa.types.is_fixed_size_list(kind):
        if kind.list_size != dim:
            raise ModelMismatch(f"{where(0)}: vector: {kind.list_size} dimensions, family {family!r} is {dim}-d")
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
        offsets = np.asarray(column.offsets)
        lengths = np.diff(offsets)
        wrong = np.flatnonzero(lengths != dim)
        if wrong.size:
            i = int(wrong[0])
            raise ModelMismatch(f"{where(i)}: vector: {int(lengths[i])} dimensions, family {family!r} is {dim}-d")
    else:
        raise InvalidInput(f"{label}: vector column is {kind}, not a list of floats")
    values = column.flatten()
    if not (pa.types.is_floating(values.type) or pa.types.is_integer(values.type)):
        raise InvalidInput(f"{label}: vector column holds {values.type}, not floats")
    if values.null_count:
        flat = int(np.flatnonzero(np.asarray(values.is_null()))[0])
        raise InvalidInput(f"{where(flat // dim)}: vector[{flat % dim}]: null")
    matrix = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.float64).reshape(len(column), dim)
    _check_matrix(where, matrix, dim, family)
    return matrix


def _read_parquet(path: Path, label: str, mapping: dict[str, str], one: OnePass) -> None:
    names = {f: mapping.get(f, f) for f in FIELDS}
    meta_columns = names["metadata"].split(",") if "," in names["metadata"] else None
    wanted = [names["chunk_id"], names["package_path"], names["text"]]
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise InvalidInput(f"{label}: reading Parquet needs pyarrow: pip install 'ragstore[parquet]'") from exc
    try:
        present = set(pq.ParquetFile(path).schema_arrow.names)
    except Exception as exc:
        raise InvalidInput(f"{label}: not a readable Parquet file: {exc}") from exc
    # Without a vector column the family's backend embeds the texts (an external family refuses them).
    with_vectors = names["vector"] in present or "vector" in mapping
    if with_vectors:
        wanted.append(names["vector"])
    if meta_columns is not None:
        wanted += meta_columns
    elif names["metadata"] in present or "metadata" in mapping:
        wanted.append(names["metadata"])
    if names["model"] in present or "model" in mapping:
        wanted.append(names["model"])
    batches = _parquet_batches(path, label, wanted, one.batch)

    def hashed() -> Iterator[_Columns]:
        row = 0
        for batch in batches:
            cols = _read_batch(batch, one, label, row, names, meta_columns, with_vectors)
            row += len(cols.ids)
            yield cols

    one.pipelined(hashed(), lambda cols: cols.hashes, lambda cols, known: _parquet_rows(one, label, cols, known))


@dataclass
class _Columns:
    """A Parquet batch read and hashed: its first row's number (from 0) and its columns as lists."""

    row: int
    ids: list[Any]
    packages: list[Any]
    texts: list[Any]
    metas: list[Any]
    models: list[Any] | None
    f32: np.ndarray | None
    hashes: list[bytes]


def _read_batch(
    batch: Any,
    one: OnePass,
    label: str,
    row: int,
    names: dict[str, str],
    meta_columns: list[str] | None,
    with_vectors: bool,
) -> _Columns:
    """The columns of a Parquet record batch, its vectors checked, each row hashed."""
    family = one.family
    data = {name: batch.column(i) for i, name in enumerate(batch.schema.names)}
    matrix = _vector_matrix(data[names["vector"]], label, row, family.dim, family.name) if with_vectors else None
    ids = data[names["chunk_id"]].to_pylist()
    packages = data[names["package_path"]].to_pylist()
    texts = data[names["text"]].to_pylist()
    models = data[names["model"]].to_pylist() if names["model"] in data else None
    if meta_columns is not None:
        columns = {c: data[c].to_pylist() for c in meta_columns}
        metas: list[Any] = [{c: columns[c][i] for c in meta_columns} for i in range(len(ids))]
    elif names["metadata"] in data:
        metas = data[names["metadata"]].to_pylist()
    else:
        metas = [None] * len(ids)
    f32 = None if matrix is None else np.ascontiguousarray(matrix, dtype=np.float32)
    # Hash the raw column values first: a row whose hash is stored is unchanged and is not validated.
    hashes = [
        raw_hash(one.key, (ids[i], packages[i], texts[i], metas[i]), b"" if f32 is None else f32[i].tobytes())
        for i in range(len(ids))
    ]
    return _Columns(row, ids, packages, texts, metas, models, f32, hashes)


def _parquet_rows(one: OnePass, label: str, cols: _Columns, known: Known) -> None:
    """Hand the rows of ``cols`` to the pass: a stored one as unchanged, the others validated."""
    from ragstore.ingest.fast import _Parsed

    parsed: list[_Parsed | tuple[str, str]] = []
    for i in range(len(cols.ids)):
        hit = known.get(cols.hashes[i])
        if hit is not None:
            parsed.append(hit)
            continue
        where = f"{label}: row {cols.row + i + 1}"
        meta = cols.metas[i]
        if isinstance(meta, str | bytes):
            try:
                meta = orjson.loads(meta)
            except orjson.JSONDecodeError as exc:
                raise InvalidInput(f"{where}: metadata: not JSON ({exc})") from exc
        elif meta is not None:  # a column of timestamps, dates, decimals: mapped as every door maps them
            meta = json_metadata(meta, f"{where}: metadata")
        fields = {"chunk_id": cols.ids[i], "package_path": cols.packages[i], "text": cols.texts[i], "metadata": meta}
        record = _record(where, fields)
        model = cols.models[i] if cols.models is not None else None
        parsed.append(_Parsed.of(where, record, cols.hashes[i], None if cols.f32 is None else cols.f32[i], model))
    one.columnar(parsed)


def raw_hash(key: bytes, values: tuple[Any, ...], vector: bytes) -> bytes:
    """The source hash of one columnar row, from its raw values (text as UTF-8, anything else as JSON):
    sha256 of ``key``, then per value its 8-byte little-endian length and its tagged bytes, then ``vector``."""
    parts = [key]
    for value in values:
        if type(value) is str:
            encoded = b"s" + value.encode("utf-8", "surrogatepass")
        else:
            try:
                encoded = b"j" + orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
            except TypeError:
                encoded = b"r" + repr(value).encode("utf-8", "backslashreplace")
        parts.append(len(encoded).to_bytes(8, "little"))
        parts.append(encoded)
    parts.append(vector)
    return hashlib.sha256(b"".join(parts)).digest()


# -- NumPy + JSONL sidecar ---------------------------------------------------------------------------------


def sidecar_of(path: Path) -> Path:
    return path.with_suffix(".jsonl")


def _read_npy(path: Path, label: str, one: OnePass) -> None:
    from ragstore.ingest.fast import fast_record, raw_lines
    from ragstore.ingest.records import slow_record

    try:
        matrix = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"{label}: not a readable NumPy .npy file: {exc}") from exc
    if matrix.ndim != 2 or matrix.dtype.kind not in "fi":
        raise InvalidInput(f"{label}: expected a 2-D matrix of floats, got shape {matrix.shape} {matrix.dtype}")
    family = one.family
    if matrix.shape[1] != family.dim:
        raise ModelMismatch(f"{label}: vector: {matrix.shape[1]} dimensions, family {family.name!r} is {family.dim}-d")
    sidecar = sidecar_of(path)
    lines = raw_lines(sidecar, str(sidecar))
    start = 0
    pending: list[tuple[str, ChunkRecord, str, str | None]] = []

    def flush() -> None:
        nonlocal start, pending
        block = np.asarray(matrix[start : start + len(pending)], dtype=np.float64)
        _check_matrix(lambda i: f"{label}: row {start + i + 1}", block, family.dim, family.name)
        _emit(one, pending, block)
        start += len(pending)
        pending = []

    for line in lines:
        if start + len(pending) >= matrix.shape[0]:
            raise InvalidInput(f"{line.where}: more records than the {matrix.shape[0]} rows of {label}")
        fast = fast_record(line.data)
        if fast is None:
            record = slow_record(line.where, line.data.decode("utf-8", "replace"))
            model = record.model
            if record.vector is not None:
                raise InvalidInput(f"{line.where}: vector: the vectors of this record are in {label}")
        else:
            (chunk_id, package, text, metadata), vector, model = fast
            record = ChunkRecord.model_construct(chunk_id=chunk_id, package_path=package, text=text, metadata=metadata)
            if vector is not None:
                raise InvalidInput(f"{line.where}: vector: the vectors of this record are in {label}")
        canonical = json.dumps(record.metadata, ensure_ascii=False, sort_keys=True)
        pending.append((line.where, record, canonical, model))
        if len(pending) >= one.batch:
            flush()
    if pending:
        flush()
    if start != matrix.shape[0]:
        raise InvalidInput(f"{sidecar}: {start} records for the {matrix.shape[0]} rows of {label}")
