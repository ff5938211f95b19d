"""A TCP proxy on 127.0.0.1 in front of the test database, that can be cut and restored: a database that
goes away and comes back, for one server process, without touching the database every other test uses.
Or its connections can go stale: each one lost on the database's side while its client's side stays quiet
until the client next sends (what a client sees of a database restarted behind a proxy or a NAT)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

from psycopg.conninfo import conninfo_to_dict, make_conninfo


class Proxy:
    def __init__(self, target: tuple[str, int] | str) -> None:
        """``target``: (host, port), or the path of a Unix socket."""
        self.target = target
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = int(probe.getsockname()[1])
        probe.close()
        self._listener: socket.socket | None = None
        self._open: list[socket.socket] = []
        self._pairs: list[tuple[socket.socket, socket.socket]] = []  # (client's side, database's side)
        self._stale: set[socket.socket] = set()  # clients' sides whose database side is gone
        self._lock = threading.Lock()

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Stop listening and close every connection through the proxy (as a database that died)."""
        if self._listener is not None:
            try:  # wakes the thread blocked in accept(); a bare close() would leave the port listening
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()
            self._listener = None
        with self._lock:
            sockets, self._open, self._pairs = self._open, [], []
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def stale(self) -> None:
        """Close the database's side of every connection open now, and nothing of the client's: each one
        stays open and silent (its socket shows nothing to read) until its client sends, when the proxy
        closes it. New connections go through as before."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
            self._stale.update(client for client, _ in pairs)
        for _, upstream in pairs:
            try:
                upstream.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = self._connect()
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open += [client, upstream]
                self._pairs.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    def _connect(self) -> socket.socket:
        if isinstance(self.target, str):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(self.target)
            return sock
        return socket.create_connection(self.target)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                if sock is sink and sink in self._stale:  # the database's side went stale: the client's stays
                    continue
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


@contextlib.contextmanager
def in_front_of(dsn: str) -> Iterator[tuple[Proxy, str]]:
    """A started proxy to ``dsn``'s server, and the DSN that reaches the same database through it."""
    params = conninfo_to_dict(dsn)
    host = str(params.get("host") or "/tmp").split(",")[0]
    port = int(str(params.get("port") or 5432).split(",")[0])
    proxy = Proxy(f"{host}/.s.PGSQL.{port}" if host.startswith("/") else (host, port))
    proxy.start()
    try:
        yield proxy, make_conninfo(dsn, host="127.0.0.1", port=str(proxy.port), connect_timeout="5")
    finally:
        proxy.cut()
