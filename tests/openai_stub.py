"""A scriptable OpenAI-compatible ``/v1/embeddings`` server on 127.0.0.1, for tests.

By default it answers every request like the real API, with deterministic unit vectors
(:func:`vector_for`). ``queue()`` scripts the next answers one request at a time: an error status,
a body that is not JSON, a slow answer, vectors of another dimension, or a normal body edited by a
function. Every request it receives is recorded in ``requests``.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import numpy as np


def vector_for(text: str, dim: int) -> list[float]:
    """The unit vector the stub returns for ``text`` at ``dim`` dimensions (the first ``dim`` of 64)."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    full = np.random.default_rng(seed).standard_normal(max(dim, 64))
    v = full[:dim]
    return [float(x) for x in v / np.linalg.norm(v)]


@dataclass
class Reply:
    """One scripted answer. With neither ``json_body`` nor ``raw``, a normal answer at ``dim``."""

    status: int = 200
    json_body: Any = None
    raw: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    # Seconds between the body's bytes: the answer is sent one byte at a time (a slow or hostile provider).
    trickle: float = 0.0
    dim: int | None = None
    edit: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # Build the body from the request: its headers (names in lower case, values as received) and raw body.
    echo: Callable[[dict[str, str], bytes], bytes] | None = None


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any


class ScriptedServer:
    """An HTTP server on 127.0.0.1 (port chosen by the system) that records every request and answers
    from its script (``queue``), else with the normal body :meth:`route` gives for the path (404 for a path
    it does not serve). ``with`` starts and stops it. The OpenAI stub below and tests/rerank_stub.py are
    this with their routes."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def base(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def route(self, path: str) -> Callable[[Any, Reply], Any] | None:
        """The normal body's maker for ``path`` (from the request body and the reply), None for a 404."""
        raise NotImplementedError

    def _answer(
        self, path: str, headers: dict[str, str], body: Any, raw: bytes = b""
    ) -> tuple[int, dict[str, str], bytes, float, float]:
        with self._lock:
            self.requests.append(Recorded(path, headers, body))
            reply = self._script.popleft() if self._script else Reply()
        normal = self.route(path)
        if normal is None:
            return 404, {}, b'{"error": {"message": "no such route"}}', 0.0, 0.0
        if reply.echo is not None:
            payload = reply.echo(headers, raw)
        elif reply.raw is not None:
            payload = reply.raw
        elif reply.json_body is not None:
            payload = json.dumps(reply.json_body).encode()
        else:
            doc = normal(body, reply)
            if reply.edit is not None:
                doc = reply.edit(doc)
            payload = json.dumps(doc).encode()  # NaN goes out as the bare token NaN, as some servers do
        return reply.status, reply.headers, payload, reply.delay, reply.trickle


class StubServer(ScriptedServer):
    """``url`` is the base URL (``http://127.0.0.1:PORT/v1``); start with ``with StubServer() as s``."""

    def __init__(self, native_dim: int = 8, honour_dimensions: bool = True) -> None:
        self.native_dim = native_dim
        self.honour_dimensions = honour_dimensions
        self.reverse_order = False
        super().__init__()

    @property
    def url(self) -> str:
        return self.base + "/v1"

    def route(self, path: str) -> Callable[[Any, Reply], Any] | None:
        if path != "/v1/embeddings":
            return None
        return lambda body, reply: self.normal_body(body, reply.dim)

    def normal_body(self, request: dict[str, Any], dim: int | None = None) -> dict[str, Any]:
        texts = request["input"]
        if dim is None:
            wanted = request.get("dimensions")
            dim = wanted if (wanted and self.honour_dimensions) else self.native_dim
        data = [{"object": "embedding", "index": i, "embedding": vector_for(t, dim)} for i, t in enumerate(texts)]
        if self.reverse_order:
            data.reverse()
        return {
            "object": "list",
            "data": data,
            "model": request.get("model"),
            "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)},
        }


def _handler_for(stub: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, extra, payload, delay, trickle = stub._answer(self.path, headers, body, raw)
            if delay:
                time.sleep(delay)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in extra.items():
                    self.send_header(name, value)
                self.end_headers()
                if not trickle:
                    self.wfile.write(payload)
                for i in range(len(payload) if trickle else 0):
                    self.wfile.write(payload[i : i + 1])
                    self.wfile.flush()
                    time.sleep(trickle)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
                pass

        def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
            pass

    return Handler
