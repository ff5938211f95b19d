"""What both framework adapters share: one family of ``external`` vectors and the calls on it.

:class:`FamilyClient` works through a :class:`ragstore.Store` (its own, opened on ``dsn``, or one the
application passes in and shares), so it is thread-safe and never holds more connections than the pool
allows; it creates the family on first use with the dimension and model name of the application's
embedding model, and refuses a model of another name or dimension (ModelMismatch).

Writes and deletes that race with each other over the same ids (a deadlock, or a vector row whose chunk a
concurrent delete just removed) are retried whole, with jittered backoff: both are idempotent, so a retry
converges to what the call asked for. Only a race that outlasts :data:`MAX_ATTEMPTS` raises Conflict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import psycopg
from psycopg import errors as pgerrors

from ragstore.common.jsonvalue import json_metadata
from ragstore.db.connection import db_errors, is_transaction_rollback
from ragstore.db.sqlfiles import query
from ragstore.embed.base import Matrix
from ragstore.embed.external import NAME as EXTERNAL
from ragstore.errors import Conflict, InvalidInput, NotFound, RagstoreError
from ragstore.families import Family, check_name, lock_term_df_shared
from ragstore.families.chunks import delete_chunks
from ragstore.ingest.programs import record_from
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.writer import IndexReport
from ragstore.search.request import Hit
from ragstore.store import Store

Conn = psycopg.Connection[Any]
T = TypeVar("T")

#: Tries of a write or delete that races with another over the same ids, before Conflict. Each lost race
#: costs the server's deadlock_timeout (1 s) at most; on a loaded machine a delete among three writers of
#: the same ids lost eight in a row, so the budget is generous: a call that converges is worth the wait.
MAX_ATTEMPTS = 20


def _raced(exc: BaseException) -> bool:
    """Whether ``exc`` (a psycopg error, or the ragstore error mapped from one) lost a race with a concurrent
    transaction over the same rows: a deadlock or serialisation failure, or a vector row whose chunk a
    concurrent delete removed between the writer's lookup and its merge (the family table's foreign key on
    ragstore.chunks refuses it)."""
    cause = exc if isinstance(exc, psycopg.Error) else exc.__cause__
    if not isinstance(cause, psycopg.Error):
        return False
    return is_transaction_rollback(cause) or isinstance(cause, pgerrors.ForeignKeyViolation)


def retry_races(fn: Callable[[], T], what: str) -> T:
    """``fn()``, tried again whole while it loses a race with a concurrent write (see the module docstring);
    Conflict, saying to retry, when the race outlasts :data:`MAX_ATTEMPTS` tries."""
    from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

    retrying = Retrying(
        retry=retry_if_exception(_raced),
        stop=stop_after_attempt(MAX_ATTEMPTS),
        wait=wait_random_exponential(multiplier=0.05, max=1.0),
        reraise=True,
    )
    try:
        for attempt in retrying:
            with attempt:
                return fn()
    except RagstoreError as exc:
        if _raced(exc):
            raise Conflict(
                f"{what} kept conflicting with concurrent writes of the same ids ({MAX_ATTEMPTS} tries); "
                f"retry (the call is idempotent): {exc}"
            ) from exc
        raise
    raise AssertionError("unreachable: tenacity either returns or raises")


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


class FamilyAdapter:
    """What both framework adapters expose of their :class:`FamilyClient` (kept in ``_client``)."""

    if TYPE_CHECKING:
        _client: FamilyClient

    def drop(self) -> None:
        """Remove the family and everything in it."""
        self._client.drop()


class FamilyClient:
    """One family of externally computed vectors, on a :class:`~ragstore.Store` (see the module docstring)."""

    def __init__(
        self,
        family: str,
        dsn: str | None,
        model: str,
        dim: int,
        store: Store | None = None,
        *,
        storage: str | None = None,
        rerank_factor: int | None = None,
    ) -> None:
        """``storage``/``rerank_factor``: how a family created here indexes its vectors (vector, halfvec or
        bit: ragstore.families.storage); an existing family keeps its own (``family migrate --storage``)."""
        self.name = check_name(family)
        self._storage = storage
        self._rerank_factor = rerank_factor
        self.model = model
        self.dim = dim
        self._owned = store is None
        self.store = store if store is not None else Store(dsn)
        self.backend = CallableBackend(model, dim, self._refuse)
        try:
            self.family = self._ensure_family()
        except BaseException:
            self.close()
            raise

    def _refuse(self, texts: list[str]) -> Any:
        raise InvalidInput("this family's text is embedded by the application's model, not by ragstore")

    def _ensure_family(self) -> Family:
        try:
            family = self.store.family(self.name)
        except NotFound:
            try:
                family = self.store.create_family(
                    self.name, self.backend, storage=self._storage, rerank_factor=self._rerank_factor
                )
            except Conflict:  # created meanwhile by another process
                family = self.store.family(self.name)
        family.check_backend(self.backend)
        return family

    def run(self, fn: Callable[[Conn], T]) -> T:
        with self.store.connection() as conn:
            return fn(conn)

    def write(self, items: Sequence[Item]) -> IndexReport:
        """Insert or update ``items`` (by ``chunk_id``): an unchanged item is a no-op, a changed one replaces
        its text, metadata and vector. InvalidInput names the first bad item; nothing of a bad call is written."""
        records: list[ChunkRecord] = []
        for i, item in enumerate(items):
            where = f"item #{i} (id {item.chunk_id!r})"
            if not isinstance(item.text, str) or not item.text.strip():
                raise InvalidInput(f"{where}: the text is empty; ragstore indexes no blank text")
            record = {"chunk_id": item.chunk_id, "package_path": item.package_path, "text": item.text}
            metadata = json_metadata(item.metadata, f"{where}: metadata")
            records.append(record_from(record | {"metadata": metadata, "vector": item.vector}, where))
        last = {record.chunk_id: i for i, record in enumerate(records)}
        # The last of several items with one id wins, as a dict update would.
        records = [record for i, record in enumerate(records) if last[record.chunk_id] == i]
        return retry_races(lambda: self.store.index(records, self.name, backend=self.backend), "a write")

    def get(self, ids: Sequence[str]) -> list[tuple[str, str, str, dict[str, Any]]]:
        """``(chunk_id, package_path, text, metadata)`` of the ids that exist, in id order."""
        with self.store.connection() as conn, db_errors():
            rows = conn.execute(query("integrations", "get_by_ids"), {"family": self.name, "ids": list(ids)})
            return [(r[0], r[1], r[2], dict(r[3] or {})) for r in rows.fetchall()]

    def delete_ids(self, ids: Sequence[str]) -> int:
        return self._delete(ids=list(ids)) if ids else 0

    def delete_packages(self, packages: Sequence[str]) -> int:
        return self._delete(packages=list(packages)) if packages else 0

    def delete_document(self, document: str) -> int:
        """Delete the LlamaIndex nodes whose source document is ``document`` (see ``delete_document`` in
        ragstore/sql/integrations.sql)."""
        return self._delete("delete_document", {"document": document})

    def server_clock(self) -> datetime:
        """The server's clock now (see ``server_clock`` in ragstore/sql/integrations.sql)."""
        with self.store.connection() as conn, db_errors():
            row = conn.execute(query("integrations", "server_clock")).fetchone()
            assert row is not None
            return row[0]  # type: ignore[no-any-return]

    def delete_earlier_nodes(self, ids: Sequence[str], nodes: Sequence[tuple[str, str, str]], since: datetime) -> int:
        """After an add of ``ids``: delete the copies earlier adds (before ``since``) left of the same LlamaIndex
        nodes, or of their documents' other versions; ``nodes`` are ``(document, node record, text)`` of the
        nodes of a document in the add (see ``delete_earlier_nodes`` in ragstore/sql/integrations.sql)."""
        if not nodes:
            return 0
        documents, records, texts = (list(column) for column in zip(*nodes, strict=True))
        params = {"ids": list(ids), "documents": documents, "nodes": records, "texts": texts, "since": since}
        return self._delete("delete_earlier_nodes", params)

    def delete_all(self) -> int:
        return self._delete(everything=True)

    def _delete(self, block: str | None = None, params: dict[str, Any] | None = None, **what: Any) -> int:
        """The chunks of ``what`` through :func:`ragstore.families.chunks.delete_chunks` (the one delete of
        chunks), or those of the named SQL ``block`` under the family's shared df lock; tried again whole
        while it races with a concurrent write."""

        def once() -> int:
            with self.store.connection() as conn:
                if block is None:
                    return delete_chunks(conn, self.name, rebuild=False, **what).chunks
                with db_errors(), conn.transaction():
                    lock_term_df_shared(conn, self.name)
                    return conn.execute(query("integrations", block), {"family": self.name, **(params or {})}).rowcount

        return retry_races(once, "a delete")

    def count(self) -> int:
        with self.store.connection() as conn, db_errors():
            row = conn.execute(query("integrations", "count"), {"family": self.name}).fetchone()
            return int(row[0]) if row else 0

    def search(self, query_text: str | None = None, **kwargs: Any) -> list[Hit]:
        """:meth:`ragstore.Store.search` on this family (``query_text`` for the full-text modes)."""
        return self.store.search(self.name, query_text, **kwargs)

    def drop(self) -> None:
        """Remove the family: its table, its chunks and its registration."""
        self.store.drop_family(self.name)

    def close(self) -> None:
        """Close the Store when this client opened it (a Store passed in stays open)."""
        if self._owned:
            self.store.close()
