"""What both framework adapters share: one family of ``external`` vectors, its connection and its calls.

:class:`FamilyClient` opens one connection, serialises the calls made on it from several threads (the
frameworks' async methods run the sync ones in worker threads), creates the family on first use with the
dimension and model name of the application's embedding model, refuses a model of another name or
dimension (ModelMismatch), and ends every call with no transaction left open.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import psycopg
from psycopg import pq
from pydantic import ValidationError

from ragstore.db.connection import connect, db_errors
from ragstore.db.sqlfiles import query
from ragstore.embed.base import Matrix
from ragstore.embed.external import NAME as EXTERNAL
from ragstore.errors import Conflict, InvalidInput, NotFound
from ragstore.families import Family, create_family, drop_family, get_family
from ragstore.ingest.readers import describe_validation_error
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.writer import IndexReport, write_records
from ragstore.search.api import search as _search
from ragstore.search.types import Hit

Conn = psycopg.Connection[Any]
T = TypeVar("T")


class CallableBackend:
    """A ragstore backend over the application's model: ``name='external'``, its model name and dimension,
    and ``embed`` calling ``fn`` (a framework's ``embed_documents`` or ``embed_query``)."""

    name = EXTERNAL

    def __init__(self, model: str, dim: int, fn: Callable[[list[str]], Sequence[Sequence[float]]]) -> None:
        self.model = model
        self.dim = dim
        self._fn = fn

    def embed(self, texts: Sequence[str]) -> Matrix:
        return as_matrix(self._fn(list(texts)), len(texts), self.dim, self.model)


def as_matrix(vectors: Any, rows: int, dim: int, model: str) -> Matrix:
    """The model's answer as a float32 matrix; InvalidInput when it has the wrong shape or a non-finite value."""
    try:
        matrix = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"the embedding model {model!r} returned something that is not a list of vectors") from exc
    if matrix.ndim != 2 or matrix.shape[0] != rows or matrix.shape[1] != dim:
        raise InvalidInput(f"the embedding model {model!r} returned shape {matrix.shape}, expected ({rows}, {dim})")
    if not np.isfinite(matrix).all():
        raise InvalidInput(f"the embedding model {model!r} returned a vector holding NaN or infinity")
    return matrix


def model_name(embedding: object) -> str:
    """The name a family records for a framework's embedding model: its ``model`` or ``model_name``
    attribute when that is text, else its class name."""
    for attribute in ("model", "model_name"):
        value = getattr(embedding, attribute, None)
        if isinstance(value, str) and value.strip():
            return value
    return type(embedding).__name__


@dataclass(frozen=True)
class Item:
    """One chunk as an adapter writes it."""

    chunk_id: str
    package_path: str
    text: str
    metadata: dict[str, Any]
    vector: list[float]


class FamilyClient:
    """One family of externally computed vectors, on one connection (see the module docstring)."""

    def __init__(self, family: str, dsn: str | None, model: str, dim: int) -> None:
        self.name = family
        self.model = model
        self.dim = dim
        self._lock = threading.RLock()
        self._conn: Conn = connect(dsn)
        try:
            self.family = self._ensure_family()
        except BaseException:
            self._conn.close()
            raise
        self.backend = CallableBackend(model, dim, self._refuse)

    def _refuse(self, texts: list[str]) -> Any:
        raise InvalidInput("this family's text is embedded by the application's model, not by ragstore")

    def _ensure_family(self) -> Family:
        probe = CallableBackend(self.model, self.dim, self._refuse)
        with self.session() as conn:
            try:
                family = get_family(conn, self.name)
            except NotFound:
                try:
                    family = create_family(conn, self.name, probe)
                except Conflict:  # created meanwhile by another process
                    family = get_family(conn, self.name)
            family.check_backend(probe)
            return family

    @contextmanager
    def session(self) -> Iterator[Conn]:
        """The connection, for this thread alone; no transaction is left open after it (committed when the
        block ends normally, rolled back when it raises)."""
        with self._lock:
            if self._conn.closed:
                raise InvalidInput("this vector store is closed")
            try:
                yield self._conn
            except BaseException:
                if self._conn.info.transaction_status != pq.TransactionStatus.IDLE:
                    self._conn.rollback()
                raise
            if self._conn.info.transaction_status != pq.TransactionStatus.IDLE:
                with db_errors():
                    self._conn.commit()

    def run(self, fn: Callable[[Conn], T]) -> T:
        with self.session() as conn:
            return fn(conn)

    def write(self, items: Sequence[Item]) -> IndexReport:
        """Insert or update ``items`` (by ``chunk_id``): an unchanged item is a no-op, a changed one replaces
        its text, metadata and vector. InvalidInput names the first bad item; nothing of a bad call is written."""
        records: list[tuple[str, ChunkRecord]] = []
        for i, item in enumerate(items):
            where = f"item #{i} (id {item.chunk_id!r})"
            if not isinstance(item.text, str) or not item.text.strip():
                raise InvalidInput(f"{where}: the text is empty; ragstore indexes no blank text")
            try:
                record = ChunkRecord(
                    chunk_id=item.chunk_id,
                    package_path=item.package_path,
                    text=item.text,
                    metadata=item.metadata,
                    vector=item.vector,
                )
            except ValidationError as exc:
                raise InvalidInput(f"{where}: {describe_validation_error(exc)}") from exc
            records.append((where, record))
        last: dict[str, int] = {}
        for i, (_, record) in enumerate(records):
            last[record.chunk_id] = i  # the last of several items with one id wins, as a dict update would
        records = [pair for i, pair in enumerate(records) if last[pair[1].chunk_id] == i]
        with self.session() as conn:
            return write_records(conn, self.family, self.backend, records, expected=len(records))

    def get(self, ids: Sequence[str]) -> list[tuple[str, str, str, dict[str, Any]]]:
        """``(chunk_id, package_path, text, metadata)`` of the ids that exist, in id order."""
        with self.session() as conn, db_errors():
            rows = conn.execute(query("integrations", "get_by_ids"), {"family": self.name, "ids": list(ids)})
            return [(r[0], r[1], r[2], dict(r[3] or {})) for r in rows.fetchall()]

    def delete_ids(self, ids: Sequence[str]) -> int:
        return self._delete("delete_ids", {"ids": list(ids)})

    def delete_packages(self, packages: Sequence[str]) -> int:
        return self._delete("delete_packages", {"packages": list(packages)})

    def delete_all(self) -> int:
        return self._delete("delete_all", {})

    def _delete(self, block: str, params: dict[str, Any]) -> int:
        with self.session() as conn, db_errors(), conn.transaction():
            return conn.execute(query("integrations", block), {"family": self.name, **params}).rowcount

    def count(self) -> int:
        with self.session() as conn, db_errors():
            row = conn.execute(query("integrations", "count"), {"family": self.name}).fetchone()
            return int(row[0]) if row else 0

    def search(self, query_text: str | None = None, **kwargs: Any) -> list[Hit]:
        """:func:`ragstore.search.search` on this family (``query_text`` for the full-text modes)."""
        with self.session() as conn:
            return _search(conn, self.name, query_text, **kwargs)

    def drop(self) -> None:
        """Remove the family: its table, its chunks and its registration."""
        with self.session() as conn:
            drop_family(conn, self.name)

    def close(self) -> None:
        with self._lock:
            self._conn.close()
