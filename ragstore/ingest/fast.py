"""The one pass of ``ragstore index``: read, validate and hash every input record once, keep what was parsed.

For each batch of input records (lines of a JSONL file, rows of a Parquet file, chunks of documents):

1. **Byte-level change detection.** Each JSONL line (each columnar row: its id, text, metadata and vector
   bytes) is hashed with the family, its model and its full-text configuration into a *source hash*. One
   query per batch finds the hashes already stored (``ragstore.chunks.source_sha256``, for a chunk whose
   vector is current): those records are unchanged and cost nothing more, never parsed, never staged.
2. **Parse once, fast.** The other JSONL lines are parsed with orjson and checked against the rules of
   :class:`~ragstore.ingest.records.ChunkRecord` with plain comparisons; a line the fast checks do not
   accept whole goes through the pydantic model, which either accepts it (the rules are the same) or
   names the file, line and field of the problem.
3. **Vectorised vector checks.** The batch's precomputed vectors become one float32 matrix; dimension,
   finiteness and float32 range are checked on the matrix at once.
4. **Kept for the write.** What passed is spooled (one pickled batch after another) to a private file in
   ``<home>/spool``; the write pass reads it back, so no input is parsed twice, and nothing is written
   before the whole input is valid.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

import numpy as np
import numpy.typing as npt
import orjson
import psycopg

from ragstore.common.closing import Closing
from ragstore.db.connection import db_errors
from ragstore.db.sqlfiles import query
from ragstore.errors import InvalidInput, ModelMismatch
from ragstore.families import Family, missing_vector
from ragstore.ingest.records import (
    FTS_SAFE_BYTES,
    MAX_ID_BYTES,
    MAX_ID_CHARS,
    MAX_TEXT_CHARS,
    ChunkRecord,
    slow_record,
)

Conn = psycopg.Connection[Any]
#: The stored chunks among a batch's source hashes: ``{hash: (chunk_id, package_path)}``.
Known = dict[bytes, tuple[str, str]]
_T = TypeVar("_T")
TextCheck = Callable[[str, str], None]
Vectors = npt.NDArray[np.float32]

#: Input records per batch of the one pass (one hash lookup, one vector check, one spooled block).
PASS_BATCH = 5000
_FIELDS = frozenset({"chunk_id", "package_path", "text", "metadata", "vector", "model"})
_NUMBERS = frozenset({float, int})
# A line with at most this many '[' and '{' cannot nest deeper than the JSON reader allows.
_MAX_BRACKETS = 64
_F32_MAX = 3.4e38


def source_key(family: Family, fts_config: str) -> bytes:
    """What every source hash of ``family`` starts with: a stored row was written for this family, model
    and full-text configuration, so a change of any of them makes every record "changed"."""
    return orjson.dumps([family.name, family.model, fts_config])


@dataclass
class Prepared:
    """A batch ready to write, by columns (plain lists pickle fast; no model object per record):
    record ``i`` is ``ids[i]``, ``packages[i]``, ``texts[i]``, ``metadata[i]``, found at ``wheres[i]``, with
    source hash ``sources[i]`` (None for documents, which are compared parsed) and, when ``has_vector[i]``,
    the vector ``vectors[i]``."""

    wheres: list[str]
    ids: list[str]
    packages: list[str]
    texts: list[str]
    metadata: list[dict[str, Any]]
    sources: list[bytes | None]
    vectors: Vectors
    has_vector: npt.NDArray[np.bool_]

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class PassResult:
    """What the one pass found: the records to write are in the spool; the unchanged ones only counted."""

    to_write: int = 0
    unchanged: int = 0
    duplicates: int = 0
    skipped: int = 0
    seen: set[str] = field(default_factory=set)
    packages: set[str] = field(default_factory=set)

    @property
    def total(self) -> int:
        return self.to_write + self.unchanged + self.duplicates + self.skipped


class Spool(Closing):
    """A private file of pickled :class:`Prepared` batches, removed on close (and by the next run when its
    process died: see :func:`ragstore.ingest.spool.remove_stale_spools`)."""

    def __init__(self) -> None:
        from ragstore.ingest.spool import spool_dir

        try:
            fd, name = tempfile.mkstemp(prefix=f"parsed-{os.getpid()}-", suffix=".bin", dir=spool_dir())
        except OSError as exc:
            raise InvalidInput(f"cannot create the ingest spool: {exc.strerror or exc}") from exc
        self.path = Path(name)
        self._out: IO[bytes] | None = os.fdopen(fd, "wb")
        self.batches = 0

    def add(self, batch: Prepared) -> None:
        assert self._out is not None
        pickle.dump(batch, self._out, protocol=5)
        self.batches += 1

    def read(self) -> Iterator[Prepared]:
        if self._out is not None:
            self._out.close()
            self._out = None
        with self.path.open("rb") as handle:
            for _ in range(self.batches):
                batch = pickle.load(handle)
                assert isinstance(batch, Prepared)
                yield batch

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
        self.path.unlink(missing_ok=True)


# -- JSONL -------------------------------------------------------------------------------------------------


def _id_ok(value: object) -> bool:
    return (
        type(value) is str
        and 0 < len(value) <= MAX_ID_CHARS
        and not value.isspace()
        and (len(value) * 4 <= MAX_ID_BYTES or len(value.encode("utf-8")) <= MAX_ID_BYTES)
    )


Fields = tuple[str, str, str, dict[str, Any]]  # chunk_id, package_path, text, metadata


def fast_record(line: bytes) -> tuple[Fields, list[Any] | None, str | None] | None:
    """``((chunk_id, package_path, text, metadata), vector, model)`` when ``line`` is a record the fast
    checks accept whole, else None (the caller then asks pydantic, which names the problem or accepts the
    line).

    Every check here is at least as strict as :class:`ChunkRecord`'s: NUL escapes, deep nesting, a value
    of a surprising type all send the line to pydantic.
    """
    if b"\\u0000" in line or line.count(b"[") + line.count(b"{") > _MAX_BRACKETS:
        return None
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if type(obj) is not dict or not obj.keys() <= _FIELDS:
        return None
    chunk_id, package, text = obj.get("chunk_id"), obj.get("package_path"), obj.get("text")
    if not (_id_ok(chunk_id) and _id_ok(package) and type(text) is str and len(text) <= MAX_TEXT_CHARS):
        return None
    metadata = obj.get("metadata")
    if metadata is None:
        metadata = {}
    elif type(metadata) is not dict:
        return None
    vector, model = obj.get("vector"), obj.get("model")
    if vector is not None:
        if type(vector) is not list or not vector:
            return None
        # The matrix check refuses what is not a number (None, text, lists); a boolean would pass as 1.0 there,
        # so the elements' types are looked at when the line holds a JSON boolean anywhere.
        if (b"true" in line or b"false" in line) and not set(map(type, vector)) <= _NUMBERS:
            return None
    if model is not None and (type(model) is not str or vector is None):
        return None
    fields: Fields = (chunk_id, package, text, metadata)  # type: ignore[assignment]  # checked by _id_ok
    return fields, vector, model


@dataclass
class RawLine:
    where: str
    data: bytes  # the line without its end of line (and without a byte-order mark on line 1)
    #: The dict orjson dumped ``data`` from (a record a program handed over), read without parsing ``data``.
    record: dict[str, Any] | None = None


_VECTOR_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _string_ok(value: str) -> bool:
    """Whether ``value`` dumped as JSON holds no ``\\u0000`` (a NUL, or a backslash before ``u0000``)."""
    return "\x00" not in value and "\\u0000" not in value


def direct_record(obj: dict[str, Any]) -> tuple[Fields, Any, str | None] | None:
    """What :func:`fast_record` returns for ``orjson.dumps(obj)``, read from ``obj`` without that line's
    parse, or None (the caller then gives the line to :func:`fast_record`).

    Every check of :func:`fast_record` is made on the values the line was dumped from (the NUL escapes and
    the brackets counted in the strings and the metadata's JSON; a vector of numbers dumps as one ``[``)
    except one: that the vector holds numbers only. :meth:`OnePass._check_vectors` makes that one on the
    batch's matrix, and has the whole batch read again from its lines (``_Redo``) when any vector read here
    is not a clean row of finite numbers, so that every message is the one the line gives. ``obj`` is
    read later than it was dumped: its vector must be the caller's copy (see
    :func:`ragstore.ingest.programs.record_lines`).
    """
    if not obj.keys() <= _FIELDS:
        return None
    chunk_id, package, text, model = obj.get("chunk_id"), obj.get("package_path"), obj.get("text"), obj.get("model")
    if not (_id_ok(chunk_id) and _id_ok(package) and type(text) is str and len(text) <= MAX_TEXT_CHARS):
        return None
    strings: tuple[str, ...] = (chunk_id, package, text)  # type: ignore[assignment]  # checked by _id_ok
    if model is not None:
        if type(model) is not str:
            return None
        strings += (model,)
    brackets = 1
    for value in strings:
        if not _string_ok(value):
            return None
        brackets += value.count("[") + value.count("{")
    metadata = obj.get("metadata")
    if metadata is None:
        metadata = {}
    elif type(metadata) is not dict:
        return None
    elif metadata:
        encoded = orjson.dumps(metadata, option=orjson.OPT_SERIALIZE_NUMPY)
        if b"\\u0000" in encoded:
            return None
        brackets += encoded.count(b"[") + encoded.count(b"{")
    else:
        brackets += 1
    vector = obj.get("vector")
    if vector is None:
        if model is not None:
            return None
    elif type(vector) is list:
        if not vector:
            return None
        brackets += 1
    elif type(vector) is np.ndarray:
        if vector.ndim != 1 or not vector.size or vector.dtype not in _VECTOR_DTYPES:
            return None
        brackets += 1
    else:
        return None
    if brackets > _MAX_BRACKETS:
        return None
    fields: Fields = (chunk_id, package, text, metadata)  # type: ignore[assignment]  # checked by _id_ok
    return fields, vector, model


def raw_lines(path: Path, label: str) -> Iterator[RawLine]:
    """The non-blank lines of a JSONL file as bytes (:func:`ragstore.common.jsonl.read_raw_lines`). UTF-8
    is checked by the parser (orjson or pydantic)."""
    from ragstore.common.jsonl import read_raw_lines

    for where, _number, data in read_raw_lines(path, label=label):
        yield RawLine(where, data)


def _decode(line: RawLine) -> str:
    try:
        return line.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{line.where}: invalid UTF-8 at byte {exc.start}") from exc


# -- the pass ----------------------------------------------------------------------------------------------


class _Parsed:
    """One record of the pass, new or changed: its fields, its vector (a list of numbers, a float32 row, or
    None) and model, its source hash, and the JSONL line (to let pydantic name a problem the vector check
    found)."""

    __slots__ = ("direct", "fields", "line", "model", "source", "vector", "where")

    def __init__(
        self,
        where: str,
        fields: Fields,
        vector: Any,
        model: str | None,
        source: bytes | None,
        line: bytes | None = None,
        direct: bool = False,
    ) -> None:
        self.where, self.fields, self.vector, self.model, self.source, self.line = (
            where,
            fields,
            vector,
            model,
            source,
            line,
        )
        #: Read by :func:`direct_record` (its vector's elements not yet looked at).
        self.direct = direct

    @classmethod
    def of(
        cls, where: str, record: ChunkRecord, source: bytes | None, vector: Any = None, model: str | None = None
    ) -> _Parsed:
        """A record pydantic read: its vector and model, unless ``vector`` (a float32 row) is given."""
        fields = (record.chunk_id, record.package_path, record.text, record.metadata)
        if vector is None:
            return cls(where, fields, record.vector, record.model, source)
        return cls(where, fields, vector, model, source)


class _Redo(Exception):
    """A batch holding a record read by :func:`direct_record` met a vector problem: read it again from its
    lines, so that the problem is named as the line names it."""


def _batched(items: Iterable[RawLine], size: int) -> Iterator[list[RawLine]]:
    batch: list[RawLine] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


class OnePass(Closing):
    """Runs the pass over sources for one family; see the module docstring. ``check_text(where, text)``
    is called for texts over :data:`~ragstore.ingest.records.FTS_SAFE_BYTES`; ``batch`` records are read,
    looked up and checked at a time."""

    def __init__(self, conn: Conn, family: Family, fts_config: str, spool: Spool, check_text: TextCheck | None) -> None:
        from psycopg import sql

        self.batch = PASS_BATCH
        self.conn = conn
        self.family = family
        self.key = source_key(family, fts_config)
        self.spool = spool
        self.check_text = check_text
        #: Called with every batch kept, after it is spooled (see :class:`ragstore.ingest.stream.BulkStream`).
        self.sink: Callable[[Prepared], None] | None = None
        self.result = PassResult()
        self._known = sql.SQL(query("ingest", "lookup_sources")).format(**family.identifiers())
        # A family empty when the pass begins holds no source hash to find: its first load skips the lookups
        # (a concurrent writer's rows are found by the writer's own lookup by id, and merged).
        with db_errors():
            row = conn.execute(sql.SQL(query("ingest", "family_is_empty")).format(**family.identifiers())).fetchone()
            conn.commit()
        self.empty = bool(row and row[0])
        self._helper: ThreadPoolExecutor | None = None

    # -- JSONL: hash, look up, parse what is new ----------------------------------------------------
    def jsonl(self, lines: Iterable[RawLine]) -> None:
        key = self.key
        sha256 = hashlib.sha256
        hashed = (
            (batch, [sha256(key + line.data).digest() for line in batch]) for batch in _batched(lines, self.batch)
        )
        self.pipelined(hashed, lambda item: item[1], lambda item, known: self._jsonl_batch(item[0], item[1], known))

    def pipelined(
        self, items: Iterator[_T], hashes_of: Callable[[_T], list[bytes]], handle: Callable[[_T, Known], None]
    ) -> None:
        """For each batch of ``items`` (read and hashed by ``next``), ``handle(item, known)`` with the stored
        ones among its hashes. While the server looks batch *k*'s hashes up (on the pass's helper thread),
        batch *k+1* is read and hashed here; then batch *k* is handled, with no lookup running (handling may
        use the connection). A problem met reading a batch is raised after the batch before it is handled,
        so that the earlier record's problem is the one named."""
        waiting: tuple[_T, Future[Known]] | None = None
        while True:
            try:
                item = next(items, None)
            except BaseException:
                if waiting is not None:
                    handle(waiting[0], waiting[1].result())
                raise
            if item is None:
                break
            if waiting is not None:
                handle(waiting[0], waiting[1].result())
            waiting = (item, self.lookup_soon(hashes_of(item)))
        if waiting is not None:
            handle(waiting[0], waiting[1].result())

    def lookup_soon(self, hashes: list[bytes]) -> Future[Known]:
        """:meth:`lookup` on the pass's helper thread (nothing to ask for a family that was empty)."""
        if self.empty:
            done: Future[Known] = Future()
            done.set_result({})
            return done
        if self._helper is None:
            self._helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragstore-lookup")
        return self._helper.submit(self.lookup, hashes)

    def close(self) -> None:
        """Waits for a lookup still running (after a failure) and ends the helper thread."""
        if self._helper is not None:
            self._helper.shutdown(wait=True)
            self._helper = None

    def _jsonl_batch(self, lines: list[RawLine], hashes: list[bytes], known: Known) -> None:
        try:
            self._finish(self._parse(lines, hashes, known, direct=True))
        except _Redo:  # nothing of the batch was kept: read again from the lines, the message is theirs
            self._finish(self._parse(lines, hashes, known, direct=False))

    def _parse(
        self, lines: list[RawLine], hashes: list[bytes], known: Known, *, direct: bool
    ) -> list[_Parsed | tuple[str, str]]:
        """The batch's records: the stored ones as ``(chunk_id, package_path)``, the others read (from the
        dict a line was dumped from when ``direct`` and the line has one, else from the line)."""
        parsed: list[_Parsed | tuple[str, str]] = []
        for line, digest in zip(lines, hashes, strict=True):
            hit = known.get(digest)
            if hit is not None:
                parsed.append(hit)
                continue
            if direct and line.record is not None:
                read = direct_record(line.record)
                if read is not None:
                    fields, vector, model = read
                    parsed.append(_Parsed(line.where, fields, vector, model, digest, line.data, direct=True))
                    continue
            fast = fast_record(line.data)
            if fast is None:
                parsed.append(_Parsed.of(line.where, slow_record(line.where, _decode(line)), digest))
            else:
                fields, vector, model = fast
                parsed.append(_Parsed(line.where, fields, vector, model, digest, line.data))
        return parsed

    def lookup(self, hashes: list[bytes]) -> Known:
        """The stored chunks among ``hashes``: ``{hash: (chunk_id, package_path)}``."""
        if self.empty:
            return {}
        with db_errors():
            params = {"hashes": hashes, "family": self.family.name, "model": self.family.model}
            rows = self.conn.execute(self._known, params, binary=True).fetchall()
            self.conn.commit()
        return {bytes(row[0]): (row[1], row[2]) for row in rows}

    # -- records already parsed (documents; records handed over by a program) -------------------------
    def records(self, records: Iterable[tuple[str, ChunkRecord]]) -> None:
        """Documents, already chunked into validated :class:`ChunkRecord`s: compared parsed (their chunking
        may change with the same bytes, so the bytes alone do not say a document is unchanged)."""
        batch: list[tuple[str, ChunkRecord]] = []
        for item in records:
            batch.append(item)
            if len(batch) >= self.batch:
                self._finish([_Parsed.of(where, record, None) for where, record in batch])
                batch = []
        if batch:
            self._finish([_Parsed.of(where, record, None) for where, record in batch])

    def columnar(self, parsed: list[_Parsed | tuple[str, str]]) -> None:
        self._finish(parsed)

    # -- common to every source ---------------------------------------------------------------------
    def _finish(self, parsed: list[_Parsed | tuple[str, str]]) -> None:
        family = self.family
        result = self.result
        seen = result.seen
        external = family.backend == "external"
        with_vector = [p for p in parsed if isinstance(p, _Parsed) and p.vector is not None]
        matrix = self._check_vectors(with_vector)
        row_of = {id(p): i for i, p in enumerate(with_vector)}
        out = Prepared([], [], [], [], [], [], np.zeros((0, family.dim), dtype=np.float32), np.zeros(0, dtype=bool))
        rows: list[int] = []
        for p in parsed:
            if not isinstance(p, _Parsed):
                chunk_id, package = p
                if chunk_id in seen:
                    result.duplicates += 1
                else:
                    seen.add(chunk_id)
                    result.packages.add(package)
                    result.unchanged += 1
                continue
            chunk_id, package, text, metadata = p.fields
            if p.vector is None and external:
                raise InvalidInput(f"{p.where}: vector: {missing_vector(family)}")
            if p.model is not None and p.model != family.model:
                raise ModelMismatch(
                    f"{p.where}: model: vector made by {p.model!r}, family {family.name!r} holds "
                    f"{family.model!r} vectors"
                )
            if self.check_text is not None and len(text) * 4 > FTS_SAFE_BYTES:
                if len(text.encode("utf-8")) > FTS_SAFE_BYTES:
                    self.check_text(p.where, text)
            if chunk_id in seen:
                result.duplicates += 1
                continue
            seen.add(chunk_id)
            if not text.strip():
                result.skipped += 1
                continue
            result.packages.add(package)
            out.wheres.append(p.where)
            out.ids.append(chunk_id)
            out.packages.append(package)
            out.texts.append(text)
            out.metadata.append(metadata)
            out.sources.append(p.source)
            rows.append(row_of.get(id(p), -1))
        if not rows:
            return
        index = np.asarray(rows, dtype=np.int64)
        out.has_vector = index >= 0
        out.vectors = np.zeros((len(rows), family.dim), dtype=np.float32)
        if out.has_vector.any():
            out.vectors[out.has_vector] = matrix[index[out.has_vector]]
        self._check_covering(out)
        self.spool.add(out)
        result.to_write += len(rows)
        if self.sink is not None:
            self.sink(out)

    def _check_covering(self, out: Prepared) -> None:
        """InvalidInput naming the first record whose entry in a covering filter-key index would be over
        btree's limit (:func:`ragstore.families.filter_keys.entry_problems`), before anything is written."""
        if not self.family.covering:
            return
        from ragstore.families.filter_keys import entry_problems

        problems = entry_problems(self.conn, self.family, out.ids, out.packages, out.metadata)
        if problems:
            i, problem = problems[0]
            raise InvalidInput(f"{out.wheres[i]}: metadata: {problem}")

    def _check_vectors(self, parsed: list[_Parsed]) -> Vectors:
        """The batch's vectors as one float32 matrix, checked at once: the dimension (ModelMismatch), then
        finite float32 values (InvalidInput naming the record and the component)."""
        dim = self.family.dim
        if not parsed:
            return np.zeros((0, dim), dtype=np.float32)
        direct = any(p.direct for p in parsed)
        lengths = np.fromiter((len(p.vector) for p in parsed), dtype=np.int64, count=len(parsed))
        wrong = np.flatnonzero(lengths != dim)
        if wrong.size:
            if direct:
                raise _Redo
            p = parsed[int(wrong[0])]
            raise ModelMismatch(
                f"{p.where}: vector: {int(lengths[wrong[0]])} dimensions, family {self.family.name!r} is {dim}-d"
            )
        # No dtype given: a text ("0.1"), a None or a huge integer makes the whole array text or objects
        # (numpy would convert "0.1" to 0.1 if asked for floats); those batches are read row by row.
        try:
            wide = np.array([p.vector for p in parsed])
        except (OverflowError, ValueError, TypeError):
            wide = np.zeros((0,))
        if wide.ndim != 2 or wide.dtype.kind not in "fiu":
            if direct:
                raise _Redo
            wide = np.stack([_row(p) for p in parsed])
        wide = wide.astype(np.float64, copy=False)
        good = np.isfinite(wide) & (np.abs(wide) <= _F32_MAX)
        if direct:
            _check_direct_numbers(parsed, wide, bool(good.all()))
        if not good.all():
            bad_row, bad_col = (int(x) for x in np.argwhere(~good)[0])
            p = parsed[bad_row]
            if p.line is not None:
                slow_record(p.where, p.line.decode("utf-8", "replace"))  # pydantic names the problem
            raise InvalidInput(
                f"{p.where}: vector[{bad_col}] is {float(wide[bad_row, bad_col])!r}: vectors hold finite float32 values"
            )
        return wide.astype(np.float32)


def _check_direct_numbers(parsed: list[_Parsed], wide: npt.NDArray[np.float64], finite: bool) -> None:
    """``_Redo`` unless every vector :func:`direct_record` read is a row of numbers its line holds as such:
    all finite (orjson dumps NaN as null), and no boolean (numpy reads True as 1.0: the rows holding an
    exact 0 or 1 have their elements' types looked at, as :func:`fast_record` does for a line with a JSON
    boolean)."""
    if not finite:
        raise _Redo
    suspect = np.flatnonzero(((wide == 0.0) | (wide == 1.0)).any(axis=1))
    for i in suspect.tolist():
        p = parsed[i]
        if p.direct and type(p.vector) is list and not set(map(type, p.vector)) <= _NUMBERS:
            raise _Redo


def _row(p: _Parsed) -> npt.NDArray[np.float64]:
    if isinstance(p.vector, list) and not set(map(type, p.vector)) <= _NUMBERS and p.line is not None:
        slow_record(p.where, p.line.decode("utf-8", "replace"))  # names the element that is not a number
    try:
        row = np.asarray(p.vector, dtype=np.float64)
        if row.ndim != 1:
            raise ValueError(f"a vector nested {row.ndim} deep")
        return row
    except (OverflowError, ValueError, TypeError) as exc:
        if p.line is not None:
            slow_record(p.where, p.line.decode("utf-8", "replace"))
        raise InvalidInput(f"{p.where}: vector: not a list of float32 numbers ({exc})") from exc
