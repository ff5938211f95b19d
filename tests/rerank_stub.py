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

from collections.abc import Callable
from typing import Any

from tests.openai_stub import Reply, ScriptedServer


def word_overlap(query: str, document: str) -> float:
    words = set(query.lower().split())
    return sum(1 for w in document.lower().split() if w in words) - len(document) / 10_000


class RerankStub(ScriptedServer):
    """``url`` is the base (``http://127.0.0.1:PORT``); ``rerank_url`` and ``chat_url`` the two endpoints."""

    def __init__(self, scorer: Callable[[str, str], float] = word_overlap, tei: bool = False) -> None:
        self.scorer = scorer
        self.tei = tei
        self.answers: dict[str, str] = {}
        super().__init__()

    @property
    def url(self) -> str:
        return self.base

    @property
    def rerank_url(self) -> str:
        return self.url + "/rerank"

    @property
    def chat_url(self) -> str:
        return self.url + "/v1"

    def route(self, path: str) -> Callable[[Any, Reply], Any] | None:
        if path.endswith("/rerank"):
            return lambda body, reply: self.rerank_body(body)
        if path == "/v1/chat/completions":
            return lambda body, reply: self.chat_body(body)
        return None

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
