"""Second-stage rerankers: the :class:`Reranker` protocol and an HTTP client for the common ``/rerank`` API.

A reranker reads the query and each candidate's text together (a cross-encoder) and scores them; the
search fetches ``rerank_depth`` first-stage candidates, asks the reranker, and returns the best ``k``
in the reranker's order (:func:`cross_rerank`). Each hit keeps its first-stage ``score`` and gains
``first_rank`` (its 1-based first-stage rank) and ``rerank_score``.

:class:`HttpReranker` speaks the shape Cohere, Jina, Infinity, vLLM and Hugging Face TEI share:

- request ``{"model"?, "query", "documents": [...], "top_n"?}`` (``api="cohere"``, the default), or
  TEI's ``{"query", "texts": [...], "truncate": true}`` (``api="tei"``);
- response ``{"results": [{"index", "relevance_score"}, ...]}`` or TEI's bare ``[{"index", "score"}, ...]``;
  both are accepted whichever ``api`` was asked.

Every answer is checked before it is used: one result per document (``min(top_n, n)`` with ``top_n``),
each index an integer in range and seen once, each score a finite number. Anything else is a
BackendError naming what was wrong; the transport guarantees (timeouts, retries, the key never shown)
are :class:`ragstore.common.http.JsonEndpoint`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ragstore.common.endpoint import EndpointClient
from ragstore.errors import BackendError, InvalidInput
from ragstore.search.request import DEFAULT_DEPTH, Hit

if TYPE_CHECKING:  # httpx is imported when a client is made: a plain search never loads it
    from typing_extensions import Unpack

    from ragstore.common.http import EndpointOptions

__all__ = ["APIS", "DEFAULT_DEPTH", "HttpReranker", "Reranker", "check_results", "cross_rerank"]

APIS = ("cohere", "tei")


@runtime_checkable
class Reranker(Protocol):
    """Scores ``documents`` against ``query``.

    ``rerank`` returns ``(index into documents, relevance score)`` pairs, best first, each index at most
    once; a higher score is more relevant. Raises BackendError when the model or service fails.
    """

    def rerank(self, query: str, documents: Sequence[str]) -> list[tuple[int, float]]: ...


class HttpReranker(EndpointClient):
    """A ``/rerank`` endpoint (see the module docstring).

    ``url`` is the endpoint; a URL whose path does not end in ``/rerank`` gets it appended
    (``http://127.0.0.1:8080`` -> ``http://127.0.0.1:8080/rerank``). ``model`` is sent when given
    (Cohere and Jina need it). ``http`` are the endpoint's :class:`~ragstore.common.http.EndpointOptions`:
    the key (``api_key_env`` or ``api_key_file``; none sent by default), the timeout (30 s) and the
    retries (3).
    """

    _shown = ("model", "api")

    def __init__(
        self,
        url: str,
        model: str | None = None,
        *,
        api: str = "cohere",
        **http: Unpack[EndpointOptions],
    ) -> None:
        if api not in APIS:
            raise InvalidInput(f"unknown reranker API {api!r}: use one of {', '.join(APIS)}")
        if model is not None and not model.strip():
            raise InvalidInput("the reranker model name is empty")
        from ragstore.common.http import JsonEndpoint

        self._http = JsonEndpoint(_rerank_url(url), what="reranker", **http)
        self.model = model
        self.api = api

    def rerank(self, query: str, documents: Sequence[str], top_n: int | None = None) -> list[tuple[int, float]]:
        """``(index, relevance score)`` for every document (the best ``top_n`` with it), best first."""
        if isinstance(documents, str):
            raise InvalidInput("rerank takes a sequence of documents, not one string")
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("the rerank query is empty")
        if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1):
            raise InvalidInput(f"top_n must be a positive integer, got {top_n!r}")
        docs = list(documents)
        if not docs:
            return []
        payload: dict[str, Any] = {"query": query}
        if self.model is not None:
            payload["model"] = self.model
        if self.api == "tei":
            payload.update(texts=docs, truncate=True)
        else:
            payload["documents"] = docs
        if top_n is not None:
            payload["top_n"] = top_n
        body = self._http.post(payload)
        expected = len(docs) if top_n is None else min(top_n, len(docs))
        try:
            return check_results(_items(body, self.url), len(docs), expected, self.url)
        except BackendError as exc:
            raise BackendError(self._http.redact(str(exc), None)) from None


def _rerank_url(url: str) -> str:
    if not isinstance(url, str) or not url.strip():
        raise InvalidInput("the reranker URL is required, e.g. http://127.0.0.1:8080/rerank")
    url = url.strip()
    return url if url.rstrip("/").endswith("/rerank") else url.rstrip("/") + "/rerank"


def _items(body: Any, where: str) -> list[Any]:
    if isinstance(body, list):
        return body
    if isinstance(body, dict) and isinstance(body.get("results"), list):
        return list(body["results"])
    raise BackendError(f"{where} answered JSON that is neither a 'results' list nor a list of results")


def check_results(items: Sequence[Any], n: int, expected: int, where: str = "the reranker") -> list[tuple[int, float]]:
    """Validated ``(index, score)`` pairs from a reranker's answer, sorted best first (ties: lower index).

    Each item is a dict with ``index`` and ``relevance_score`` (or ``score``), or an ``(index, score)``
    pair. Raises BackendError for fewer than ``expected`` items, more than ``n``, an index that is not an
    integer in ``0..n-1`` or appears twice, or a score that is not a finite number.
    """
    if len(items) < expected:
        raise BackendError(f"{where} returned {len(items)} results for {expected} documents")
    if len(items) > n:
        raise BackendError(f"{where} returned {len(items)} results for {n} documents")
    seen: set[int] = set()
    out: list[tuple[int, float]] = []
    for pos, item in enumerate(items):
        if isinstance(item, dict):
            index = item.get("index")
            score = item.get("relevance_score", item.get("score"))
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            index, score = item
        else:
            raise BackendError(f"{where}: result {pos} is not an object with 'index' and 'relevance_score'")
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n:
            raise BackendError(f"{where}: result {pos} has index {index!r}, not an integer in 0..{n - 1}")
        if index in seen:
            raise BackendError(f"{where}: index {index} appears twice")
        seen.add(index)
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            raise BackendError(f"{where}: result {pos} (index {index}) has score {score!r}, not a finite number")
        out.append((index, float(score)))
    out.sort(key=lambda pair: (-pair[1], pair[0]))
    return out


def cross_rerank(hits: Sequence[Hit], query: str, reranker: Reranker, k: int) -> list[Hit]:
    """The best ``k`` of ``hits`` in ``reranker``'s order, each with ``first_rank`` and ``rerank_score``.

    ``score``, ``ranks`` and ``scores`` stay the first stage's. The reranker must score at least
    ``min(k, len(hits))`` of them (a reranker may answer only its top few); the answer is checked as
    :func:`check_results` does, whatever the Reranker.
    """
    if not hits:
        return []
    pairs = reranker.rerank(query, [hit.text for hit in hits])
    checked = check_results(pairs, len(hits), min(k, len(hits)), type(reranker).__name__)
    return [replace(hits[i], first_rank=i + 1, rerank_score=score) for i, score in checked[:k]]
