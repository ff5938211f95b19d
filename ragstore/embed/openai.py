"""The ``openai`` backend: any OpenAI-compatible ``POST {base_url}/embeddings``.

OpenAI, Ollama, vLLM, LM Studio and most gateways speak it. Texts go in batches; 429, 5xx, timeouts
and connection errors are retried with exponential backoff (Retry-After honoured); every response is
checked before a vector leaves this module.

The API key comes from an environment variable or a file and never appears in a repr, a log line or an
error message: a provider that echoes the request back (headers, body) in an error has every piece of
four or more characters of the key removed, in any escaped spelling, and its words are cut to a short
excerpt of printable characters. A ``user:password@`` in the base URL is sent only as the HTTP Basic
``Authorization`` header to that host; the URL ragstore keeps and prints has no password.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ragstore.common.closing import Closing
from ragstore.common.http import EndpointOptions, JsonEndpoint, parse_retry_after, split_credentials
from ragstore.common.text import check_texts
from ragstore.embed.base import Matrix
from ragstore.errors import BackendError, InvalidInput

if TYPE_CHECKING:
    from typing_extensions import Unpack

log = logging.getLogger(__name__)

PROBE_TEXT = "dimension probe"


class OpenAIBackend(Closing):
    """``name='openai'``; ``model`` is the provider's model name; ``dim`` as configured or probed.

    ``dimensions`` asks the provider for shorter (Matryoshka) vectors; longer ones that come back anyway
    are truncated and re-normalised here. ``dim`` is ``dimensions``, else ``dim``, else found by
    embedding :data:`PROBE_TEXT` once. ``http`` are the endpoint's
    :class:`~ragstore.common.http.EndpointOptions`: the key (``api_key_env``, by default
    ``OPENAI_API_KEY``, or ``api_key_file``), the timeout (30 s) and the retries (5). ``embed`` raises
    InvalidInput for an empty text and BackendError when the provider refuses, keeps failing after
    ``max_retries`` retries, or answers malformed vectors.
    """

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        dim: int | None = None,
        dimensions: int | None = None,
        *,
        batch_size: int = 128,
        **http: Unpack[EndpointOptions],
    ) -> None:
        if not base_url:
            raise InvalidInput("base_url is required, e.g. http://127.0.0.1:8000/v1")
        if not model:
            raise InvalidInput("model is required")
        for option, value in (("dim", dim), ("dimensions", dimensions)):
            if value is not None and value < 1:
                raise InvalidInput(f"{option} must be at least 1, got {value}")
        if dim is not None and dimensions is not None and dim != dimensions:
            raise InvalidInput(f"dim={dim} contradicts dimensions={dimensions}")
        if batch_size < 1:
            raise InvalidInput(f"batch_size must be at least 1, got {batch_size}")
        self._base_url = base_url
        url, _ = split_credentials(base_url)
        self._url = url.rstrip("/") + "/embeddings"
        self._model = model
        self._dim = dimensions if dimensions is not None else dim
        self._dimensions = dimensions
        self._batch_size = batch_size
        options: EndpointOptions = {"api_key_env": "OPENAI_API_KEY", "max_retries": 5}
        options.update(http)
        self._endpoint = JsonEndpoint(_with_path(base_url, "/embeddings"), what="embedding", **options)

    @property
    def model(self) -> str:
        return self._model

    @property
    def base_url(self) -> str:
        """The endpoint as configured (it may hold credentials: print it through a masking function)."""
        return self._base_url

    @property
    def dim(self) -> int:
        if self._dim is None:
            self.embed([PROBE_TEXT])  # sets _dim from the answer
        assert self._dim is not None
        return self._dim

    def __repr__(self) -> str:
        key = "'***'" if self._endpoint.has_key else "None"
        return (
            f"OpenAIBackend(url={self._url!r}, model={self._model!r}, dim={self._dim!r}, "
            f"dimensions={self._dimensions!r}, api_key={key}, batch_size={self._batch_size})"
        )

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._endpoint.close()

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts`` in batches of ``batch_size``; rows come back in input order."""
        try:
            return self._embed(texts)
        except BackendError as exc:
            # The last word on what a message may show: no piece of a secret, one printable line.
            raise BackendError(self._redact(str(exc))) from None

    def _embed(self, texts: Sequence[str]) -> Matrix:
        check_texts(texts)
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        parts = [
            self._embed_batch(list(texts[start : start + self._batch_size]))
            for start in range(0, len(texts), self._batch_size)
        ]
        return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)

    def _embed_batch(self, batch: list[str]) -> Matrix:
        payload: dict[str, Any] = {"model": self._model, "input": batch}
        if self._dimensions is not None:
            payload["dimensions"] = self._dimensions
        body = self._post(payload)
        vectors = self._validate(body, len(batch))
        if self._dim is None:
            self._dim = vectors.shape[1]
        return vectors

    def _post(self, payload: dict[str, Any]) -> Any:
        """POST with retries (:class:`~ragstore.common.http.JsonEndpoint`); the decoded JSON of a 2xx answer."""
        return self._endpoint.post(payload)

    def _redact(self, text: str, limit: int | None = None) -> str:
        # Providers echo a wrong key back in their error message, some the whole request with its headers.
        return self._endpoint.redact(text, limit)

    def _validate(self, body: Any, n: int) -> Matrix:
        where = f"{self._url} (model {self._model!r})"
        if not isinstance(body, dict) or not isinstance(body.get("data"), list):
            raise BackendError(f"{where} answered JSON without a 'data' list")
        data: list[Any] = body["data"]
        if len(data) != n:
            raise BackendError(f"{where} returned {len(data)} embeddings for {n} texts")
        rows: list[Any] = [None] * n
        for pos, item in enumerate(data):
            if not isinstance(item, dict) or "embedding" not in item:
                raise BackendError(f"{where}: data[{pos}] has no 'embedding'")
            index = item.get("index")
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n:
                raise BackendError(f"{where}: data[{pos}].index is {index!r}, not an integer in 0..{n - 1}")
            if rows[index] is not None:
                raise BackendError(f"{where}: data index {index} appears twice")
            rows[index] = item["embedding"]
        lengths = {len(r) if isinstance(r, list) else -1 for r in rows}
        if -1 in lengths:
            raise BackendError(f"{where}: an embedding is not a list of numbers")
        if len(lengths) != 1:
            raise BackendError(f"{where}: embeddings of different lengths {sorted(lengths)} in one answer")
        try:
            vectors = np.array(rows, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise BackendError(f"{where}: an embedding holds something that is not a number") from exc
        if vectors.ndim != 2 or vectors.shape[1] == 0:
            raise BackendError(f"{where}: embeddings are empty or nested")
        if not np.isfinite(vectors).all():
            bad = int(np.argmax(~np.isfinite(vectors).all(axis=1)))
            raise BackendError(f"{where}: embedding {bad} holds NaN or infinity")
        zero = ~np.any(vectors, axis=1)
        if zero.any():
            raise BackendError(f"{where}: embedding {int(np.argmax(zero))} is all zeros")
        return self._fit_dim(vectors, where)

    def _fit_dim(self, vectors: np.ndarray[Any, np.dtype[np.float64]], where: str) -> Matrix:
        got = vectors.shape[1]
        if self._dimensions is not None and got > self._dimensions:
            vectors = vectors[:, : self._dimensions]
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            if not (norms > 0).all():
                raise BackendError(f"{where}: an embedding cut to {self._dimensions} dimensions is all zeros")
            vectors = vectors / norms
        elif self._dim is not None and got != self._dim:
            raise BackendError(f"{where} returned {got}-dimension embeddings, expected {self._dim}")
        return np.ascontiguousarray(vectors, dtype=np.float32)


def _with_path(base_url: str, path: str) -> str:
    """``base_url`` (credentials and all) with ``path`` appended to its path."""
    parts = urllib.parse.urlsplit(base_url)
    return urllib.parse.urlunsplit(parts._replace(path=parts.path.rstrip("/") + path))


def _retry_after(value: str | None) -> float | None:
    """Seconds a Retry-After header asks for (see :func:`ragstore.common.http.parse_retry_after`)."""
    return parse_retry_after(value)
