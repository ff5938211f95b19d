"""What a search remembers between calls: families, filter estimates and embedding backends.

A :class:`Caches` object holds all three; it is thread-safe (one lock around each read-modify-write), so
one object serves every connection of a pool. :class:`ragstore.Store` owns one; the functional API
(``ragstore.search.api.search(conn, ...)``) uses the one :func:`caches_for` keeps for its connection,
which dies with the connection. Nothing else in the library keeps state between calls.

- **families** (name -> :class:`~ragstore.families.Family`): the HNSW search by vector runs on the
  remembered Family with no lookup round trip; the server checks what it relies on (the table name and
  the dimension), and a stale entry is read again (see :mod:`ragstore.search.api`).
- **estimates** ((table, package, metadata JSON) -> the planner's row estimate, with its expiry): a
  filter repeated within :data:`ESTIMATE_TTL_SECONDS` plans with no round trip.
- **backends** (configuration -> :class:`~ragstore.embed.base.Backend`): a search must not pay for a new
  model session or HTTP client (tens of milliseconds) on every query.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragstore.embed.base import Backend
    from ragstore.families import Family
    from ragstore.search.vector import RowEstimate

# Estimates are remembered this long; statistics themselves change only when the family is analyzed
# (autovacuum, or ragstore's bulk load).
ESTIMATE_TTL_SECONDS = 60.0
MAX_ESTIMATES = 256

EstimateKey = tuple[str, str | None, str | None]


class Caches:
    """The families, filter estimates and backends one Store (or one connection) remembers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._families: dict[str, Family] = {}
        self._estimates: dict[EstimateKey, tuple[RowEstimate, float]] = {}
        self._backends: dict[str, Backend] = {}

    # -- families ---------------------------------------------------------------------------------
    def family(self, name: str) -> Family | None:
        """The remembered family ``name``, or None."""
        return self._families.get(name)

    def remember_family(self, family: Family) -> None:
        with self._lock:
            self._families[family.name] = family

    def forget_family(self, name: str) -> None:
        """Forget ``name`` and every estimate made on it (a dropped or swapped family)."""
        with self._lock:
            self._families.pop(name, None)

    # -- filter estimates -------------------------------------------------------------------------
    def estimate(self, key: EstimateKey) -> RowEstimate | None:
        """The estimate remembered for ``key`` if it has not expired."""
        hit = self._estimates.get(key)
        if hit is not None and hit[1] > time.monotonic():
            return hit[0]
        return None

    def remember_estimate(self, key: EstimateKey, estimate: RowEstimate) -> None:
        with self._lock:
            if len(self._estimates) >= MAX_ESTIMATES:
                self._estimates.clear()
            self._estimates[key] = (estimate, time.monotonic() + ESTIMATE_TTL_SECONDS)

    # -- backends ---------------------------------------------------------------------------------
    def backend(self, key: str, make: Callable[[], Backend]) -> Backend:
        """The backend remembered for ``key``, made by ``make()`` once (under the lock: two threads
        asking at once load one model)."""
        found = self._backends.get(key)
        if found is not None:
            return found
        with self._lock:
            found = self._backends.get(key)
            if found is None:
                found = make()
                self._backends[key] = found
            return found

    def clear(self) -> None:
        with self._lock:
            self._families.clear()
            self._estimates.clear()
            self._backends.clear()


# The caches of connections used through the functional API, one per connection, gone with it.
_PER_CONNECTION: weakref.WeakKeyDictionary[Any, Caches] = weakref.WeakKeyDictionary()
_PER_CONNECTION_LOCK = threading.Lock()


def caches_for(conn: Any) -> Caches:
    """The :class:`Caches` of ``conn`` (made on first use, dropped when the connection is collected)."""
    found = _PER_CONNECTION.get(conn)
    if found is None:
        with _PER_CONNECTION_LOCK:
            found = _PER_CONNECTION.get(conn)
            if found is None:
                found = Caches()
                _PER_CONNECTION[conn] = found
    return found
