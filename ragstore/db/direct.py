"""Connections lent without a pool, for a Store with one short-lived caller (the command line).

:class:`DirectConnections` is the part of ``psycopg_pool.ConnectionPool`` a :class:`~ragstore.Store`
uses (``getconn``, ``putconn``, ``drain``, ``close``, ``closed``), without the pool's threads and
retries: a connection is opened by :func:`ragstore.db.connection.connect` when one is first asked for
(so a database that does not answer fails at once, with that function's one-line message), kept for the
next call, and at most ``size`` are open at a time (the second one serves an index run's second writer).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import pq
from psycopg_pool import PoolClosed, PoolTimeout

from ragstore.db.connection import connect

__all__ = ["DirectConnections"]

Conn = psycopg.Connection[Any]


class DirectConnections:
    """Up to ``size`` connections to ``dsn``, opened on demand, in autocommit as a pool lends them."""

    def __init__(self, dsn: str, size: int = 2) -> None:
        self._dsn = dsn
        self._size = size
        self._idle: list[Conn] = []
        self._lent = 0
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def getconn(self, timeout: float | None = None) -> Conn:
        """An idle connection, else a new one; PoolTimeout when ``size`` are lent (the caller goes on
        with fewer), PoolClosed after :meth:`close`."""
        if self._closed:
            raise PoolClosed("the connections are closed")
        if self._idle:
            conn = self._idle.pop()
        elif self._lent >= self._size:
            raise PoolTimeout(f"all {self._size} connections are lent")
        else:
            conn = connect(self._dsn, autocommit=True)
        self._lent += 1
        return conn

    def putconn(self, conn: Conn) -> None:
        """Take ``conn`` back: kept when it is sound and idle, else closed (a transaction left open is
        rolled back by closing)."""
        self._lent -= 1
        idle = not conn.closed and conn.info.transaction_status == pq.TransactionStatus.IDLE
        if self._closed or not idle or not conn.autocommit:
            conn.close()
        else:
            self._idle.append(conn)

    def drain(self) -> None:
        """Close the idle connections: the next call opens a fresh one (after ``migrate`` created the
        vector type, so that it knows pgvector's types)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def close(self, timeout: float = 5.0) -> None:
        """Close every idle connection; a lent one is closed when it comes back."""
        self._closed = True
        self.drain()
