"""What a family holds, chunk by chunk: delete, get, list and export (``ragstore delete|get|list|export``).

Every call names one family and reads or deletes that family's chunks only. A package prefix matches as
``--package`` in a search does: ``package_path`` starting with the text, wildcards taken literally
(:func:`ragstore.common.like.like_prefix`). Listings and exports are in ``(package_path, chunk_id)`` byte
order (the C collation), so a listing is stable across pages and servers.

:func:`delete_chunks` is the one delete of chunks by id or package: the CLI, :class:`ragstore.Store` and
the framework adapters call it. It runs in :func:`ragstore.families.deleting` (the family's shared df
lock, as a prune takes it), so the family's word counts stay exact and a concurrent index run cannot
deadlock with it. The reader role may get, list and export; deleting needs the app role or the owner
(the database refuses the reader, and the error says ``permission denied``).

:func:`export_chunks` streams (a server-side cursor, a batch of rows at a time) JSONL or Parquet records
that ``ragstore index`` reads back to the same chunks; a file is written beside its target and renamed
into place when complete, so an interrupted export leaves no partial file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson
from psycopg import sql

from ragstore.common.like import like_prefix
from ragstore.db.connection import Conn, db_errors
from ragstore.db.sqlfiles import query
from ragstore.errors import InvalidInput, NotFound
from ragstore.families import Family, deleting, get_family
from ragstore.search.request import to_float32

__all__ = [
    "EXPORT_FORMATS",
    "MAX_LIST_LIMIT",
    "Chunk",
    "ChunkPage",
    "DeleteReport",
    "ExportReport",
    "GetResult",
    "ListedChunk",
    "delete_chunks",
    "export_chunks",
    "get_chunks",
    "list_chunks",
]

EXPORT_FORMATS = ("jsonl", "parquet")
MAX_LIST_LIMIT = 10_000
DEFAULT_LIST_LIMIT = 100
_EXPORT_BATCH = 1000


@dataclass(frozen=True)
class Chunk:
    """One stored chunk; ``vector`` and ``model`` only when asked for (and the family table holds one)."""

    chunk_id: str
    package_path: str
    text: str
    metadata: dict[str, Any]
    vector: np.ndarray | None = None
    model: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The chunk as a record ``ragstore index`` reads (``vector`` and ``model`` when present)."""
        data: dict[str, Any] = {
            "chunk_id": self.chunk_id,
            "package_path": self.package_path,
            "text": self.text,
            "metadata": self.metadata,
        }
        if self.vector is not None:
            data["vector"] = [float(x) for x in self.vector]
            data["model"] = self.model
        return data


@dataclass(frozen=True)
class GetResult:
    """The chunks found, in the order their ids were given (each once), and the ids the family lacks."""

    family: str
    chunks: list[Chunk]
    missing: list[str]


@dataclass(frozen=True)
class DeleteReport:
    """What a delete removed (or, with ``dry_run``, would remove): chunks per package, and the ids given
    that the family did not hold."""

    family: str
    chunks: int
    packages: dict[str, int]
    missing: list[str] = field(default_factory=list)
    dry_run: bool = False

    def summary(self) -> str:
        """One line: ``deleted 12 chunks in 3 packages`` (``would delete`` in a dry run)."""
        verb = "would delete" if self.dry_run else "deleted"
        chunks = "chunk" if self.chunks == 1 else "chunks"
        packages = "package" if len(self.packages) == 1 else "packages"
        line = f"{self.family}: {verb} {self.chunks} {chunks} in {len(self.packages)} {packages}"
        if self.missing:
            line += f"; {len(self.missing)} of the ids given not found"
        return line

    def as_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "chunks": self.chunks,
            "packages": dict(sorted(self.packages.items())),
            "missing": self.missing,
            "dry_run": self.dry_run,
        }


@dataclass(frozen=True)
class ListedChunk:
    chunk_id: str
    package_path: str


@dataclass(frozen=True)
class ChunkPage:
    """One page of a listing; ``total`` and ``packages`` count every chunk under the prefix, and ``next``
    is the ``after`` of the next page (None on the last)."""

    family: str
    package: str | None
    chunks: list[ListedChunk]
    total: int
    packages: int
    next: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "package": self.package,
            "chunks": [{"chunk_id": c.chunk_id, "package_path": c.package_path} for c in self.chunks],
            "total": self.total,
            "packages": self.packages,
            "next": self.next,
        }


@dataclass(frozen=True)
class ExportReport:
    family: str
    format: str
    chunks: int
    vectors: bool
    path: str | None

    def summary(self) -> str:
        where = self.path or "stdout"
        return f"{self.family}: exported {self.chunks} chunks to {where} ({self.format})"

    def as_dict(self) -> dict[str, Any]:
        return {"family": self.family, "format": self.format, "chunks": self.chunks, "vectors": self.vectors,
                "path": self.path}  # fmt: skip


def _texts(values: Sequence[str], what: str) -> list[str]:
    if isinstance(values, str):
        raise InvalidInput(f"{what} must be a list of strings, got one string {values!r}")
    out: list[str] = []
    for value in values:
        if not isinstance(value, str) or not value.strip():
            raise InvalidInput(f"{what}: {value!r} is not a non-blank string")
        if "\x00" in value:
            raise InvalidInput(f"{what}: {value!r} contains a NUL character")
        out.append(value)
    return list(dict.fromkeys(out))


def _prefix(package: str | None) -> str:
    if package is None:
        return "%"
    if not isinstance(package, str) or "\x00" in package:
        raise InvalidInput(f"package must be a package_path prefix (text), got {package!r}")
    return like_prefix(package)


# -- delete -------------------------------------------------------------------------------------------


def delete_chunks(
    conn: Conn,
    family: str,
    *,
    ids: Sequence[str] = (),
    packages: Sequence[str] = (),
    prefixes: Sequence[str] = (),
    everything: bool = False,
    dry_run: bool = False,
    rebuild: bool = True,
) -> DeleteReport:
    """Delete ``family``'s chunks of ``ids``, of exactly the ``packages`` named, and under the package_path
    ``prefixes`` (or, with ``everything``, all of them); with ``dry_run`` only say what would go. With
    ``rebuild``, a delete of at least a tenth of the family rebuilds its HNSW index as a prune does.

    Raises InvalidInput (nothing to match, a blank id or prefix), NotFound (no such family), and the
    mapped database error (``permission denied`` for the reader role)."""
    fam = get_family(conn, family)
    chosen_ids = _texts(ids, "ids")
    exact = _texts(packages, "packages")
    like = [like_prefix(p) for p in _texts(prefixes, "package prefixes")]
    if not (everything or chosen_ids or exact or like):
        raise InvalidInput("say what to delete: ids, packages or package prefixes")
    params = {"family": fam.name, "ids": chosen_ids, "packages": exact, "prefixes": like}
    kinds = (
        ["all"]
        if everything
        else [k for k, given in (("ids", chosen_ids), ("packages", exact), ("prefixes", like)) if given]
    )
    per_package: dict[str, int] = {}
    missing: list[str] = []

    def run_all(verb: str) -> None:
        for kind in kinds:
            row = conn.execute(query("chunks", f"{verb}_{kind}"), params).fetchone()
            assert row is not None
            for package, count in dict(row[0] or {}).items():
                per_package[str(package)] = per_package.get(str(package), 0) + int(count)
            missing.extend(row[1] or [])

    if dry_run:
        with db_errors(), conn.transaction():
            run_all("preview")
    else:
        with deleting(conn, fam.name):
            run_all("delete")
    report = DeleteReport(fam.name, sum(per_package.values()), per_package, missing, dry_run)
    if rebuild and not dry_run and report.chunks:
        from ragstore.ingest.writer import rebuild_if_churned

        rebuild_if_churned(conn, fam, report.chunks, report.chunks)
    return report


# -- get and list -------------------------------------------------------------------------------------


def get_statement(fam: Family, ids: Sequence[str]) -> tuple[sql.Composed, dict[str, Any]]:
    """The statement of :func:`get_chunks` and its parameters (shared with the async store)."""
    statement = sql.SQL(query("chunks", "get_chunks")).format(table=sql.Identifier(fam.table))
    return statement, {"family": fam.name, "ids": list(ids)}


def read_get(fam: Family, ids: Sequence[str], rows: Sequence[Sequence[Any]], vectors: bool) -> GetResult:
    """The :class:`GetResult` of the rows :func:`get_statement` returned."""
    found = {row[0]: _chunk(row, vectors) for row in rows}
    return GetResult(fam.name, [found[i] for i in ids if i in found], [i for i in ids if i not in found])


def check_ids(ids: Sequence[str]) -> list[str]:
    """The ids of a get, each once; InvalidInput for none or a blank one."""
    chosen = _texts(ids, "ids")
    if not chosen:
        raise InvalidInput("give at least one chunk id")
    return chosen


def get_chunks(conn: Conn, family: str, ids: Sequence[str], *, vectors: bool = False) -> GetResult:
    """The chunks of ``ids`` in ``family`` (in the order given), and which ids it does not hold.
    Raises InvalidInput (no id, a blank one), NotFound (no such family)."""
    fam = get_family(conn, family)
    chosen = check_ids(ids)
    statement, params = get_statement(fam, chosen)
    with db_errors():
        rows = conn.execute(statement, params).fetchall()
    return read_get(fam, chosen, rows, vectors)


def list_params(family: str, package: str | None, limit: int, after: str | None) -> dict[str, Any]:
    """The parameters of a listing's statements (``list_chunks``, ``count_chunks``, ``chunk_exists``),
    checked: InvalidInput for a limit outside 1..10,000 or a bad prefix or cursor."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIST_LIMIT:
        raise InvalidInput(f"limit must be a whole number from 1 to {MAX_LIST_LIMIT}, got {limit!r}")
    if after is not None and (not isinstance(after, str) or not after.strip() or "\x00" in after):
        raise InvalidInput(f"after must be a chunk id, got {after!r}")
    return {"family": family, "prefix": _prefix(package), "limit": limit + 1, "after": after, "id": after}


def read_page(
    family: str, package: str | None, params: dict[str, Any], rows: Sequence[Sequence[Any]], counts: Sequence[Any]
) -> ChunkPage:
    """The :class:`ChunkPage` of a listing's rows (one more than the limit, when there are more) and counts."""
    limit = int(params["limit"]) - 1
    page = [ListedChunk(str(r[0]), str(r[1])) for r in rows[:limit]]
    more = len(rows) > limit
    return ChunkPage(family, package, page, int(counts[0]), int(counts[1]), page[-1].chunk_id if more else None)


def list_chunks(
    conn: Conn, family: str, *, package: str | None = None, limit: int = DEFAULT_LIST_LIMIT, after: str | None = None
) -> ChunkPage:
    """Up to ``limit`` chunks of ``family`` (under the ``package`` prefix), in (package_path, chunk_id) byte
    order, after the chunk ``after`` (the ``next`` of the page before); with the counts under the prefix.
    Raises InvalidInput, NotFound (no such family, or no chunk ``after`` in it)."""
    fam = get_family(conn, family)
    params = list_params(fam.name, package, limit, after)
    with db_errors(), conn.transaction():  # one snapshot for the page and its counts
        if after is not None:
            row = conn.execute(query("chunks", "chunk_exists"), params).fetchone()
            if not (row and row[0]):
                raise NotFound(f"family {fam.name!r} holds no chunk {after!r} to list after")
        rows = conn.execute(query("chunks", "list_chunks"), params).fetchall()
        counts = conn.execute(query("chunks", "count_chunks"), params).fetchone()
    assert counts is not None
    return read_page(fam.name, package, params, rows, counts)


def _chunk(row: Sequence[Any], vectors: bool) -> Chunk:
    metadata = dict(row[3] or {})
    if vectors and len(row) > 4 and row[4] is not None:
        return Chunk(row[0], row[1], row[2], metadata, to_float32(row[4]), row[5])
    return Chunk(row[0], row[1], row[2], metadata)


# -- export -------------------------------------------------------------------------------------------


def export_chunks(
    conn: Conn,
    family: str,
    out: str | os.PathLike[str] | IO[bytes],
    *,
    format: str = "jsonl",
    package: str | None = None,
    vectors: bool = False,
) -> ExportReport:
    """Write ``family``'s chunks (under the ``package`` prefix) to ``out`` (a path, or a binary stream) as
    JSONL lines or a Parquet file of records ``ragstore index`` reads back; ``vectors`` adds each chunk's
    vector and model. Streams: memory holds one batch of rows. A path is written whole or not at all.

    Raises InvalidInput (an unknown format; Parquet without pyarrow; an unwritable path), NotFound."""
    if format not in EXPORT_FORMATS:
        raise InvalidInput(f"export format must be one of {', '.join(EXPORT_FORMATS)}, got {format!r}")
    fam = get_family(conn, family)
    writer = _parquet_writer(fam, vectors) if format == "parquet" else None
    if isinstance(out, str | os.PathLike):
        path = Path(out)
        with _replacing(path) as handle:
            count = _export(conn, fam, handle, writer, package, vectors)
        return ExportReport(fam.name, format, count, vectors, str(path))
    return ExportReport(fam.name, format, _export(conn, fam, out, writer, package, vectors), vectors, None)


@contextlib.contextmanager
def _replacing(path: Path) -> Iterator[IO[bytes]]:
    """A temporary file beside ``path``, renamed to it when the block ends normally, removed otherwise."""
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot write: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _rows(conn: Conn, fam: Family, package: str | None, vectors: bool) -> Iterator[list[Any]]:
    """The family's rows in export order, a batch at a time, from a server-side cursor in one snapshot."""
    name = "export_chunks" if vectors else "export_chunks_text"
    statement = sql.SQL(query("chunks", name)).format(table=sql.Identifier(fam.table))
    with db_errors(), conn.transaction(), conn.cursor(name="ragstore_export") as cur:
        cur.execute(statement, {"family": fam.name, "prefix": _prefix(package)})
        while batch := cur.fetchmany(_EXPORT_BATCH):
            yield batch


def _export(conn: Conn, fam: Family, handle: IO[bytes], parquet: Any, package: str | None, vectors: bool) -> int:
    count = 0
    if parquet is None:
        for batch in _rows(conn, fam, package, vectors):
            lines = [orjson.dumps(_chunk(row, vectors).as_dict()) + b"\n" for row in batch]
            handle.write(b"".join(lines))
            count += len(batch)
        handle.flush()
        return count
    schema, to_table = parquet
    import pyarrow.parquet as pq

    with pq.ParquetWriter(handle, schema) as sink:
        for batch in _rows(conn, fam, package, vectors):
            sink.write_table(to_table([_chunk(row, vectors) for row in batch]))
            count += len(batch)
    return count


def _parquet_writer(fam: Family, vectors: bool) -> tuple[Any, Any]:
    """The Parquet schema of an export and the function making a table of a batch of chunks: the columns
    ``ragstore index`` reads (metadata as JSON text; the vector a fixed-size list of float32)."""
    try:
        import pyarrow as pa
    except ImportError as exc:
        raise InvalidInput("writing Parquet needs pyarrow: pip install 'ragstore[parquet]'") from exc
    fields = [
        pa.field("chunk_id", pa.string(), nullable=False),
        pa.field("package_path", pa.string(), nullable=False),
        pa.field("text", pa.large_string(), nullable=False),
        pa.field("metadata", pa.string(), nullable=False),
    ]
    if vectors:
        fields += [pa.field("vector", pa.list_(pa.float32(), fam.dim)), pa.field("model", pa.string())]
    schema = pa.schema(fields)

    def to_table(chunks: list[Chunk]) -> Any:
        columns: list[Any] = [
            [c.chunk_id for c in chunks],
            [c.package_path for c in chunks],
            [c.text for c in chunks],
            [orjson.dumps(c.metadata).decode("utf-8") for c in chunks],
        ]
        if vectors:
            columns += [pa.array([c.vector for c in chunks], type=schema.field("vector").type)]
            columns += [[c.model for c in chunks]]
        return pa.Table.from_arrays(columns, schema=schema)

    return schema, to_table
