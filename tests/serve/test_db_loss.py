"""The database dies under a running ``ragstore serve`` and comes back: while it is gone every answer is a
503 with one JSON line (no token, no traceback), and once it returns the server answers the library's
hits again by itself, without a restart: every request sent after the database accepts connections again
is a 200, the first one included, whether the database died under load or while the server sat idle
(its pooled connections all dead). The server's own embedded PostgreSQL, killed with SIGKILL. And a
loss the pools cannot see before they lend a connection (a TCP proxy that drops the database's side of
every connection and leaves the server's side quiet): the first requests after it are answered."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from ragstore import Store, migrate
from ragstore.db.server import EmbeddedServer
from ragstore.serve import tokens
from tests.toolkit.app import bearer, client_for, seeded, token  # noqa: F401 (the fixture)
from tests.toolkit.chunks import records
from tests.toolkit.serve_process import answers, free_port, until
from tests.toolkit.tcp_proxy import in_front_of

pytest.importorskip("uvicorn")

pytestmark = pytest.mark.reliability

QUERY = {"query": "copies files to topic 3", "k": 5, "mode": "hybrid"}
SEARCH = "/v1/families/docs/search"
CHUNKS = "/v1/families/docs/chunks"
MODES = ("hnsw", "hybrid", "fts")


@pytest.fixture
def own_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    server = EmbeddedServer(Path(tmp_path_factory.mktemp("serve-pg")))
    server.ensure_running()
    try:
        yield server
    finally:
        try:
            server.stop()
        except Exception:
            pid = server.running_pid()
            if pid:
                os.kill(pid, signal.SIGKILL)


def accepts_connections(dsn: str) -> float:
    """Wait until the database accepts a connection; when it first did (time.monotonic())."""
    for _ in range(1200):
        try:
            with psycopg.connect(dsn, connect_timeout=5) as conn:
                conn.execute("SELECT 1")
            return time.monotonic()
        except psycopg.OperationalError:
            time.sleep(0.1)
    pytest.fail("the database never accepted a connection again")


class Load:
    """Clients searching in threads until stopped; each answer kept as (status, JSON or text), and when
    its request was sent in ``sent`` (time.monotonic(), same index)."""

    def __init__(self, base: str, token: str, clients: int = 4) -> None:
        self.answers: list[tuple[int, object]] = []
        self.sent: list[float] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(base, token)) for _ in range(clients)]
        for thread in self._threads:
            thread.start()

    def _run(self, base: str, token: str) -> None:
        with httpx.Client(base_url=base, timeout=120, headers={"Authorization": f"Bearer {token}"}) as client:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    answer = client.post("/v1/families/docs/search", json=QUERY)
                except httpx.TransportError as exc:  # the server itself must never go away
                    self.failures.append(repr(exc))
                    continue
                body = answer.json() if answer.headers.get("content-type") == "application/json" else answer.text
                with self._lock:  # the two lists keep the same index
                    self.sent.append(started)
                    self.answers.append((answer.status_code, body))

    def sent_after(self, moment: float) -> list[tuple[int, object]]:
        """The answers of the requests sent after ``moment``."""
        with self._lock:
            return [answer for sent, answer in zip(self.sent, self.answers, strict=True) if sent > moment]

    def count(self, status: int, since: int = 0) -> int:
        return sum(1 for code, _ in self.answers[since:] if code == status)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=180)


def test_killing_the_database_mid_load_gives_503s_and_the_server_recovers_by_itself(
    own_server: EmbeddedServer, tmp_path: Path
) -> None:
    dsn = own_server.dsn()
    migrate.upgrade(dsn)
    with Store(dsn, pool_size=1) as store:
        store.create_family("docs", "offline")
        store.index(records(), "docs")
        expected = [h.chunk_id for h in store.search("docs", QUERY["query"], k=5, mode="hybrid")]
    with psycopg.connect(dsn) as conn:
        reader = tokens.create(conn, "ragstore_reader").token
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "ragstore.cli", "--dsn", dsn, "serve", "--port", str(port)]
    command += ["--pool-size", "2", "--pool-timeout", "5"]
    env = {**os.environ, "RAGSTORE_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    load: Load | None = None
    try:
        until(lambda: answers(f"{base}/healthz"), "/healthz answered", proc)
        load = Load(base, reader)
        running = load
        until(lambda: running.count(200) >= 20, "20 searches answered", proc)

        pid = own_server.running_pid()
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        killed = len(load.answers)
        until(lambda: running.count(503, killed) >= 8, "8 answers of 503 after the kill", proc, attempts=1200)
        health = httpx.get(f"{base}/healthz", timeout=120)
        assert health.status_code == 503 and set(health.json()) == {"error"}

        own_server.ensure_running()
        back = len(load.answers)
        returned = accepts_connections(dsn)

        def recovered() -> bool:
            tail = running.answers[back:]
            return len(tail) >= 10 and all(code == 200 for code, _ in tail[-10:])

        until(recovered, "10 searches in a row answered after the database returned", proc, attempts=1800)
        load.stop()
        assert proc.poll() is None, "the server exited"
        assert load.failures == []
        for code, body in load.answers:
            assert code in (200, 503), (code, body)
            if code == 200:
                assert isinstance(body, dict) and [h["chunk_id"] for h in body["hits"]] == expected
            else:
                assert isinstance(body, dict) and set(body) == {"error"}, body
                message = str(body["error"])
                assert "\n" not in message and message.startswith(("database unavailable", "no connection")), message
                assert reader not in message
        after = [code for code, _ in load.answers[back:]]
        assert after[-10:] == [200] * 10
        sent_after_return = load.sent_after(returned)
        assert sent_after_return and [code for code, _ in sent_after_return] == [200] * len(sent_after_return)

        # Killed while the server sits idle: every pooled connection is dead when the database returns,
        # and the very first request after it (token check, search) is answered, as is /healthz.
        pid = own_server.running_pid()
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        until(lambda: own_server.running_pid() is None, "the database gone", proc)
        own_server.ensure_running()
        accepts_connections(dsn)
        headers = {"Authorization": f"Bearer {reader}"}
        first = httpx.post(f"{base}/v1/families/docs/search", json=QUERY, headers=headers, timeout=120)
        assert first.status_code == 200, first.text
        assert [h["chunk_id"] for h in first.json()["hits"]] == expected
        assert httpx.get(f"{base}/healthz", timeout=120).status_code == 200
    finally:
        if load is not None:
            load.stop()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    log = (out + err).decode()
    assert "Traceback" not in log, log[-3000:]
    assert reader not in log and (tokens.parse(reader) or (0, reader))[1] not in log


async def test_the_first_requests_on_connections_lost_unseen_are_answered(seeded: str) -> None:  # noqa: F811
    # Every pooled connection of the server (the login's, the reader's) is lost while its socket stays
    # quiet, so the pool's check before lending sees nothing: the first request after it (its token
    # check, its search or get, on both pools) is still answered, on new connections.
    reader = bearer(token(seeded, "ragstore_reader"))
    search = {"query": "copies files to topic 3", "k": 5, "mode": "hnsw"}
    with in_front_of(seeded) as (proxy, through):
        async for http in client_for(through):
            expected = {mode: await http.post(SEARCH, json={**search, "mode": mode}, headers=reader) for mode in MODES}
            assert all(answer.status_code == 200 for answer in expected.values()), expected
            ids = [hit["chunk_id"] for hit in expected["hnsw"].json()["hits"]]
            got = await http.get(CHUNKS, params={"id": ids}, headers=reader)
            assert got.status_code == 200 and got.json()["chunks"]
            answers = {}
            for mode in MODES:  # hnsw on the event loop's pool, hybrid and fts in a worker thread's
                proxy.stale()
                answers[mode] = await http.post(SEARCH, json={**search, "mode": mode}, headers=reader)
            proxy.stale()
            got_again = await http.get(CHUNKS, params={"id": ids}, headers=reader)
            proxy.stale()
            health = await http.get("/healthz")
    assert {mode: a.status_code for mode, a in answers.items()} == dict.fromkeys(MODES, 200), answers
    assert {mode: a.json() for mode, a in answers.items()} == {mode: a.json() for mode, a in expected.items()}
    assert got_again.status_code == 200 and got_again.json() == got.json()
    assert health.status_code == 200
