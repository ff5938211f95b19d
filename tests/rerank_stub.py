"""A scriptable ``/rerank`` and ``/v1/chat/completions`` server on 127.0.0.1, for tests.

By default ``POST .../rerank`` scores every document by ``scorer(query, document)`` (default: how many
of the query's words it holds, then shorter first) and answers Cohere's shape
``{"results": [{"index", "relevance_score"}]}`` best first (``tei=True``: TEI's bare list of
``{"index", "score"}``), honouring ``top_n``; ``POST /v1/chat/completions`` answers ``answers[query]``
(default ``"hypothetical answer to: <query>"``). ``queue()`` scripts the next answers with
:class:`tests.openai_stub.Reply` (status, JSON body, raw bytes, headers, delay, an ``edit`` of the
normal body, an ``echo`` of the request). Every request is recorded in ``requests``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.openai_stub import Recorded, Reply


def word_overlap(query: str, document: str) -> float:
    words = set(query.lower().split())
    return sum(1 for w in document.lower().split() if w in words) - len(document) / 10_000


class RerankStub:
    """``url`` is the base (``http://127.0.0.1:PORT``); ``rerank_url`` and ``chat_url`` the two endpoints."""

    def __init__(self, scorer: Callable[[str, str], float] = word_overlap, tei: bool = False) -> None:
        self.scorer = scorer
        self.tei = tei
        self.answers: dict[str, str] = {}
        self.requests: list[Recorded] = []
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def rerank_url(self) -> str:
        return self.url + "/rerank"

    @property
    def chat_url(self) -> str:
        return self.url + "/v1"

    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    def __enter__(self) -> RerankStub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def rerank_body(self, request: dict[str, Any]) -> Any:
        docs = request.get("documents", request.get("texts"))
        scored = sorted(
            ((i, self.scorer(request["query"], d)) for i, d in enumerate(docs)), key=lambda p: (-p[1], p[0])
        )
        if request.get("top_n"):
            scored = scored[: request["top_n"]]
        if self.tei:
            return [{"index": i, "score": s} for i, s in scored]
        return {"id": "stub", "results": [{"index": i, "relevance_score": s} for i, s in scored]}

    def chat_body(self, request: dict[str, Any]) -> dict[str, Any]:
        query = request["messages"][-1]["content"]
        content = self.answers.get(query, f"hypothetical answer to: {query}")
        return {
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "model": request.get("model"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": None},
                    "finish_reason": "stop",
                }
            ],
        }

    def _answer(
        self, path: str, headers: dict[str, str], body: Any, raw: bytes
    ) -> tuple[int, dict[str, str], bytes, float]:
        with self._lock:
            self.requests.append(Recorded(path, headers, body))
            reply = self._script.popleft() if self._script else Reply()
        if path.endswith("/rerank"):
            normal: Callable[[dict[str, Any]], Any] = self.rerank_body
        elif path == "/v1/chat/completions":
            normal = self.chat_body
        else:
            return 404, {}, b'{"error": {"message": "no such route"}}', 0.0
        if reply.echo is not None:
            payload = reply.echo(headers, raw)
        elif reply.raw is not None:
            payload = reply.raw
        elif reply.json_body is not None:
            payload = json.dumps(reply.json_body).encode()
        else:
            doc = normal(body)
            if reply.edit is not None:
                doc = reply.edit(doc)
            payload = json.dumps(doc).encode()
        return reply.status, reply.headers, payload, reply.delay


def _handler_for(stub: RerankStub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, extra, payload, delay = stub._answer(self.path, headers, body, raw)
            if delay:
                time.sleep(delay)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in extra.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
