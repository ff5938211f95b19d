"""Binding by absence: the reader port, and the object that holds readers for declared stores only.

An agent declares the stores it uses (:class:`~ragstore.memory.models.AgentProfile`). :func:`bind` asks the
reader factory for a reader for each declared store and for no other; the :class:`Binding` it returns
holds a read-only mapping whose keys are exactly those stores. The composer iterates over that mapping
and nothing else, so an undeclared store has no reader at all — not a reader that returns nothing — and
there is no code path through which it could be read.

The reader port is :class:`Reader`: one method, ``read(request)``. The :class:`ReadRequest` carries
everything a database-backed reader may push into SQL (the floors, the cap as ``limit``, ``not_after``
and the task hint); the composer re-applies all of it, so a reader that ignores them stays correct.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Protocol, runtime_checkable

from ragstore.errors import InvalidInput
from ragstore.memory.models import ALL_STORES, AgentProfile, MemoryRecord, Store

__all__ = ["Binding", "FunctionReader", "ReadRequest", "Reader", "ReaderFactory", "bind"]


@dataclass(frozen=True, slots=True)
class ReadRequest:
    """What the composer wants from one store of one agent.

    ``limit`` is the store's cap; ``min_salience``/``min_confidence`` its floors (inclusive, ``None``
    for no floor); ``not_after`` the composition's ``now`` (records with ``at > not_after`` are ignored);
    ``task_hint`` the case-insensitive substring the content must contain, or ``None`` when the store
    is not filtered by the hint. Order wanted: ``at`` descending, then ``id`` ascending by code point.
    """

    store: Store
    agent: str
    limit: int
    not_after: datetime
    min_salience: float | None = None
    min_confidence: float | None = None
    task_hint: str | None = None


@runtime_checkable
class Reader(Protocol):
    """Reads one store of one agent.

    Contract: the records returned must include every record of ``request.agent`` in ``request.store``
    that passes the request's predicates and is among the first ``request.limit`` of them in the wanted
    order. A reader may apply any of the predicates, the order and the limit (a Postgres reader should:
    ``WHERE agent = %s AND store = %s AND at <= %s AND salience >= %s … ORDER BY at DESC, id COLLATE "C"
    LIMIT %s``), but if it applies the limit it must apply the predicates and the order first. It may
    return more than needed, in any order; it may raise — the composer then treats the store as empty
    and reports the failure.
    """

    def read(self, request: ReadRequest) -> Iterable[MemoryRecord]:
        """Return the records of ``request.store`` for ``request.agent`` (a superset is fine)."""
        ...


@dataclass(frozen=True, slots=True)
class FunctionReader:
    """Adapts a plain function ``fn(request) -> Iterable[MemoryRecord]`` to the :class:`Reader` port."""

    fn: Callable[[ReadRequest], Iterable[MemoryRecord]]

    def read(self, request: ReadRequest) -> Iterable[MemoryRecord]:
        """Call the wrapped function."""
        return self.fn(request)


ReaderFactory = Callable[[Store, str], Reader]
"""``factory(store, agent) -> Reader``; :func:`bind` calls it once per declared store, never otherwise."""


@dataclass(frozen=True, slots=True)
class Binding:
    """An agent id and one reader per declared store — and no entry at all for the other stores.

    ``readers`` is frozen into a read-only mapping ordered by the canonical store order; its keys are
    the declared stores (:attr:`stores`). Raises :class:`~ragstore.errors.InvalidInput` when a key is
    not a :class:`Store` or a value lacks a ``read`` method. Build it with :func:`bind`.
    """

    agent: str
    readers: Mapping[Store, Reader] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for store, reader in self.readers.items():
            if not isinstance(store, Store):
                raise InvalidInput(f"binding for agent {self.agent!r}: {store!r} is not a memory store")
            if not isinstance(reader, Reader):
                raise InvalidInput(
                    f"binding for agent {self.agent!r}: reader for {store.value} has no read(request) method"
                )
        ordered = {store: self.readers[store] for store in ALL_STORES if store in self.readers}
        # A private copy behind a read-only view: mutating the caller's dict later cannot add a store.
        object.__setattr__(self, "readers", MappingProxyType(ordered))

    @property
    def stores(self) -> tuple[Store, ...]:
        """The declared stores, in canonical order."""
        return tuple(self.readers)


def bind(profile: AgentProfile, reader_factory: ReaderFactory) -> Binding:
    """Bind ``profile``'s declared stores to readers made by ``reader_factory``.

    Promises: ``reader_factory`` is called exactly once per declared store (in canonical order) and
    never for an undeclared store; the binding holds exactly those readers. An exception raised by the
    factory propagates unchanged (binding is set-up, not composition); raises
    :class:`~ragstore.errors.InvalidInput` if the factory returns something without ``read``.
    """
    readers = {store: reader_factory(store, profile.agent) for store in ALL_STORES if store in profile.stores}
    return Binding(agent=profile.agent, readers=readers)
