"""HyDE (hypothetical document embeddings): search with the embedding of an answer a chat model wrote.

:class:`Hyde` asks an OpenAI-compatible ``POST {base_url}/chat/completions`` (OpenAI, vLLM, Ollama,
llama.cpp, LM Studio, most gateways) for a short passage that would answer the query, embeds it with
the family's own backend and combines it with the query's vector:

- ``mode="average"`` (the default): the mean of the two unit vectors, normalised. The query's own words
  still count, so a hypothetical answer that drifts off topic cannot take the search with it.
- ``mode="replace"``: the hypothetical answer's vector alone (the original HyDE).

Only the vector changes: the full-text leg of a hybrid search keeps the user's query text.

The passage's vector is cached in the embedding cache (``ragstore.embedding_cache``) under a model key
naming the chat endpoint and model and the embedding space (``hyde:<chat model>@<endpoint>><embedding
key>``), by the sha256 of the exact request (prompt, query, max_tokens, temperature): the same question
asks neither the chat model nor the embedding model again. A role that may not write the cache still
searches (the vector is just not kept).

When the chat model cannot help — it refuses (a ``refusal`` or a ``content_filter`` finish), answers
nothing, answers something malformed, or the endpoint keeps failing or timing out — the search runs on
the plain query vector and the call's report says so (``used=False`` and a ``note``); it is logged as a
warning too. :meth:`Hyde.vector_with_report` returns each call's report with its vector; :attr:`Hyde.last`
is the report of the calling thread's last query, so one Hyde serves concurrent searches.
Configuration errors (no URL, a bad mode) raise InvalidInput at construction.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ragstore.common.endpoint import EndpointClient
from ragstore.db.connection import Conn
from ragstore.embed import cache as _cache
from ragstore.embed.base import Backend
from ragstore.errors import BackendError, InvalidInput, RagstoreError

if TYPE_CHECKING:  # httpx is imported when a client is made: a plain search never loads it
    from typing_extensions import Unpack

    from ragstore.common.http import EndpointOptions

__all__ = ["DEFAULT_PROMPT", "HYDE_MODES", "Hyde", "HydeReport", "combine"]

log = logging.getLogger(__name__)
Vector = npt.NDArray[np.float32]

HYDE_MODES = ("average", "replace")
DEFAULT_PROMPT = (
    "Write a short passage, as it would appear in technical documentation, that answers the question. "
    "Answer with the passage only."
)
# The longest hypothetical answer kept (characters): a model that rambles is cut, not embedded whole.
MAX_ANSWER_CHARS = 4000


@dataclass(frozen=True)
class HydeReport:
    """What HyDE did for the last query: ``used`` (the vector includes a hypothetical answer), ``cached``
    (it came from the embedding cache), ``answer`` (the passage when freshly written, else None) and
    ``note`` (why the plain query was used, or why the cache was not written)."""

    used: bool
    cached: bool = False
    answer: str | None = None
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"used": self.used, "cached": self.cached, "answer": self.answer, "note": self.note}


class Hyde(EndpointClient):
    """An OpenAI-compatible chat endpoint writing hypothetical answers (see the module docstring).

    ``base_url`` is the API root (``http://127.0.0.1:11434/v1``); ``/chat/completions`` is appended
    unless it is there already. ``http`` are the endpoint's :class:`~ragstore.common.http.EndpointOptions`:
    the key (``api_key_env``, by default ``OPENAI_API_KEY``, or ``api_key_file``; none sent when unset),
    the timeout (30 s) and the retries (2).
    """

    _shown = ("model", "mode")

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        mode: str = "average",
        prompt: str = DEFAULT_PROMPT,
        max_tokens: int = 256,
        temperature: float = 0.0,
        **http: Unpack[EndpointOptions],
    ) -> None:
        if mode not in HYDE_MODES:
            raise InvalidInput(f"unknown HyDE mode {mode!r}: use one of {', '.join(HYDE_MODES)}")
        if not isinstance(model, str) or not model.strip():
            raise InvalidInput("HyDE needs a chat model name (--hyde-model)")
        if not isinstance(base_url, str) or not base_url.strip():
            raise InvalidInput("HyDE needs the chat endpoint's base URL (--hyde-url), e.g. http://127.0.0.1:11434/v1")
        if not prompt.strip():
            raise InvalidInput("the HyDE prompt is empty")
        if max_tokens < 1:
            raise InvalidInput(f"HyDE max_tokens must be at least 1, got {max_tokens}")
        url = base_url.strip().rstrip("/")
        url = url if url.endswith("/chat/completions") else url + "/chat/completions"
        from ragstore.common.http import JsonEndpoint

        options: EndpointOptions = {"api_key_env": "OPENAI_API_KEY", "max_retries": 2}
        options.update(http)
        self._http = JsonEndpoint(url, what="HyDE", **options)
        self.model = model
        self.mode = mode
        self.prompt = prompt
        self.max_tokens = max_tokens
        self.temperature = temperature
        self._local = threading.local()

    @property
    def last(self) -> HydeReport | None:
        """The report of the last query this thread ran through :meth:`vector` (None before any)."""
        report: HydeReport | None = getattr(self._local, "last", None)
        return report

    def _payload(self, query: str) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": [{"role": "system", "content": self.prompt}, {"role": "user", "content": query}],
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }

    def generate(self, query: str) -> str:
        """The hypothetical answer to ``query``. BackendError when refused, empty, malformed or failing."""
        body = self._http.post(self._payload(query))
        where = f"{self.url} (model {self.model!r})"
        choices = body.get("choices") if isinstance(body, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise BackendError(f"{where} answered JSON without a 'choices' list")
        choice: dict[str, Any] = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            raise BackendError(f"{where}: choices[0] has no 'message' object")
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal.strip():
            raise BackendError(f"{where} refused to answer: {self._http.redact(refusal)!r}")
        if choice.get("finish_reason") == "content_filter":
            raise BackendError(f"{where} refused to answer (finish_reason content_filter)")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise BackendError(f"{where}: the answer's content is {type(content).__name__}, not text")
        if not content or not content.strip():
            raise BackendError(f"{where} answered with empty content")
        return content.strip()[:MAX_ANSWER_CHARS]

    def cache_key(self, backend: Backend) -> str:
        """The embedding-cache model key of this endpoint's passages embedded by ``backend``."""
        endpoint = _cache.endpoint_identity(self.url)
        return f"hyde:{self.model}@{endpoint}>{_cache.cache_key(backend)}"

    def digest(self, query: str) -> bytes:
        """sha256 of the exact request for ``query`` (prompt, query, max_tokens, temperature)."""
        request = self._payload(query)
        request.pop("model")
        return hashlib.sha256(json.dumps(request, sort_keys=True, ensure_ascii=False).encode("utf-8")).digest()

    def vector(self, conn: Conn | None, backend: Backend, query: str, query_vector: Vector) -> Vector:
        """The search vector for ``query`` (:meth:`vector_with_report`); its report becomes this thread's
        :attr:`last`."""
        vector, self._local.last = self.vector_with_report(conn, backend, query, query_vector)
        return vector

    def vector_with_report(
        self, conn: Conn | None, backend: Backend, query: str, query_vector: Vector
    ) -> tuple[Vector, HydeReport]:
        """The search vector for ``query``: combined with a hypothetical answer's, or ``query_vector`` as
        it was when HyDE cannot help; and this call's report. ``conn`` None skips the cache."""
        hypothetical: Vector | None = None
        cached = False
        note: str | None = None
        answer: str | None = None
        key = digest = None
        if conn is not None:
            key, digest = self.cache_key(backend), self.digest(query)
            try:
                with conn.transaction():  # a failed read must not leave the caller's transaction aborted
                    found = _cache.lookup(conn, key, [digest])
            except RagstoreError as exc:
                found, note = {}, f"embedding cache not read: {exc}"
            if digest in found:
                hypothetical, cached = found[digest], True
        if hypothetical is None:
            try:
                answer = self.generate(query)
                hypothetical = np.asarray(backend.embed([answer])[0], dtype=np.float32)
            except BackendError as exc:
                return query_vector, _fell_back(f"HyDE fell back to the plain query: {exc}")
            if conn is not None and key is not None and digest is not None:
                note = self._store(conn, key, digest, hypothetical) or note
        if hypothetical.shape != query_vector.shape or not np.all(np.isfinite(hypothetical)):
            shape = hypothetical.shape
            return query_vector, _fell_back(f"HyDE fell back to the plain query: the answer's vector has shape {shape}")
        return combine(query_vector, hypothetical, self.mode), HydeReport(
            used=True, cached=cached, answer=answer, note=note
        )

    @staticmethod
    def _store(conn: Conn, key: str, digest: bytes, hypothetical: Vector) -> str | None:
        try:
            with conn.transaction():  # a savepoint inside the caller's transaction, committed in autocommit
                _cache.store(conn, key, [digest], hypothetical.reshape(1, -1))
        except RagstoreError as exc:  # e.g. a read-only role: the search goes on, uncached
            return f"HyDE answer not cached: {exc}"
        return None


def _fell_back(note: str) -> HydeReport:
    log.warning("%s", note)
    return HydeReport(used=False, note=note)


def combine(query_vector: Vector, hypothetical: Vector, mode: str) -> Vector:
    """``replace``: ``hypothetical``; ``average``: the normalised mean of both unit vectors (a zero vector
    counts as absent)."""
    if mode not in HYDE_MODES:
        raise InvalidInput(f"unknown HyDE mode {mode!r}: use one of {', '.join(HYDE_MODES)}")
    if mode == "replace":
        return np.ascontiguousarray(hypothetical, dtype=np.float32)
    total = np.zeros(query_vector.shape, dtype=np.float64)
    for v in (query_vector, hypothetical):
        norm = float(np.linalg.norm(v))
        if norm > 0:
            total += np.asarray(v, dtype=np.float64) / norm
    norm = float(np.linalg.norm(total))
    if norm > 0:
        total /= norm
    return np.ascontiguousarray(total, dtype=np.float32)
