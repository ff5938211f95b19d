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

import base64
import email.utils
import json
import logging
import math
import os
import random
import time
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from ragstore.embed.base import Matrix, check_texts
from ragstore.errors import BackendError, InvalidInput, mask_secrets, redact

log = logging.getLogger(__name__)

PROBE_TEXT = "dimension probe"
# A Retry-After longer than this is cut to it: a stuck batch should fail, not sleep for an hour.
MAX_RETRY_AFTER = 60.0
# The longest excerpt of a provider's own words (an error body) that goes into a message.
EXCERPT = 200
_RETRY_STATUS = frozenset({408, 429})


class _Retryable(Exception):
    """One failed attempt worth retrying: what went wrong (already redacted) and the Retry-After asked."""

    def __init__(self, problem: str, retry_after: float | None = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.retry_after = retry_after


class OpenAIBackend:
    """``name='openai'``; ``model`` is the provider's model name; ``dim`` as configured or probed.

    ``dimensions`` asks the provider for shorter (Matryoshka) vectors; longer ones that come back anyway
    are truncated and re-normalised here. ``dim`` is ``dimensions``, else ``dim``, else found by
    embedding :data:`PROBE_TEXT` once. ``embed`` raises InvalidInput for an empty text and BackendError
    when the provider refuses, keeps failing after ``max_retries`` retries, or answers malformed vectors.
    """

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        dim: int | None = None,
        dimensions: int | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        api_key_file: str | os.PathLike[str] | None = None,
        batch_size: int = 128,
        timeout: float = 30.0,
        max_retries: int = 5,
        backoff: float = 0.5,
        *,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        transport: httpx.BaseTransport | None = None,
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
        if timeout <= 0 or max_retries < 0 or backoff < 0:
            raise InvalidInput("timeout must be positive; max_retries and backoff must not be negative")
        self._base_url = base_url
        url, auth = _split_credentials(base_url)
        self._url = url.rstrip("/") + "/embeddings"
        self._model = model
        self._dim = dimensions if dimensions is not None else dim
        self._dimensions = dimensions
        self._api_key = _read_key(api_key_env, api_key_file)
        # Everything a provider could echo back that must never be shown.
        self._secrets: list[str] = [s for s in (self._api_key,) if s]
        if auth is not None:
            user, password = auth
            basic = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            self._secrets += [s for s in (password, basic) if s]
        self._batch_size = batch_size
        self._max_retries = max_retries
        self._backoff = backoff
        self._sleep = sleep
        self._rng = rng or random.Random()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(timeout),
            transport=transport,
            auth=httpx.BasicAuth(*auth) if auth is not None else None,
        )

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
        key = "'***'" if self._api_key else "None"
        return (
            f"OpenAIBackend(url={self._url!r}, model={self._model!r}, dim={self._dim!r}, "
            f"dimensions={self._dimensions!r}, api_key={key}, batch_size={self._batch_size})"
        )

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def __enter__(self) -> OpenAIBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        """POST with retries; the decoded JSON body of a 2xx answer."""
        retrying = Retrying(
            stop=stop_after_attempt(self._max_retries + 1),
            wait=self._delay,
            retry=retry_if_exception_type(_Retryable),
            sleep=self._sleep,
            before_sleep=self._log_retry,
            reraise=True,
        )
        try:
            return retrying(self._attempt, payload)
        except _Retryable as exc:
            attempts = retrying.statistics.get("attempt_number", self._max_retries + 1)
            raise BackendError(f"{self._url} still failing after {attempts} attempts ({exc.problem})") from None

    def _attempt(self, payload: dict[str, Any]) -> Any:
        """One POST: the decoded body, BackendError (not worth retrying) or _Retryable."""
        try:
            response = self._client.post(self._url, json=payload)
        except httpx.TransportError as exc:  # connect/read/write errors and timeouts
            raise _Retryable(f"{type(exc).__name__}: {self._redact(str(exc), EXCERPT) or 'no detail'}") from None
        except httpx.HTTPError as exc:  # e.g. a redirect loop, a URL httpx refuses
            raise BackendError(f"{self._url}: {type(exc).__name__}: {self._redact(str(exc), EXCERPT)}") from None
        if response.is_success:
            try:
                return response.json()
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise BackendError(
                    f"{self._url} answered {response.status_code} with a body that is not JSON: "
                    f"{self._redact(response.text, EXCERPT)!r}"
                ) from None
        status = response.status_code
        problem = f"HTTP {status}: {self._provider_message(response)}"
        if status not in _RETRY_STATUS and status < 500:
            raise BackendError(f"{self._url} refused the request ({problem})")
        raise _Retryable(problem, _retry_after(response.headers.get("Retry-After")))

    def _delay(self, state: RetryCallState) -> float:
        """Exponential backoff from ``backoff``, or the provider's Retry-After (capped), plus 10% jitter."""
        failure = state.outcome.exception() if state.outcome is not None else None
        retry_after = failure.retry_after if isinstance(failure, _Retryable) else None
        delay = self._backoff * 2 ** (state.attempt_number - 1)
        delay = min(retry_after, MAX_RETRY_AFTER) if retry_after is not None else delay
        return delay * (1.0 + 0.1 * self._rng.random())  # jitter keeps parallel clients from retrying in step

    def _log_retry(self, state: RetryCallState) -> None:
        failure = state.outcome.exception() if state.outcome is not None else None
        problem = failure.problem if isinstance(failure, _Retryable) else "unknown"
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        log.info("embedding request failed (%s); retry %d in %.2fs", problem, state.attempt_number, wait)

    def _provider_message(self, response: httpx.Response) -> str:
        """The provider's own words: OpenAI's ``{"error": {"message": ...}}`` or the start of the body."""
        try:
            body = response.json()
        except ValueError:
            return self._redact(response.text.strip(), EXCERPT) or response.reason_phrase
        message: Any = body
        if isinstance(body, dict):
            error = body.get("error", body.get("detail", body.get("message", body)))
            message = error.get("message", error) if isinstance(error, dict) else error
        return self._redact(str(message), EXCERPT)

    def _redact(self, text: str, limit: int | None = None) -> str:
        # Providers echo a wrong key back in their error message, some the whole request with its headers.
        return redact(text, self._secrets, limit=limit)

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


def _split_credentials(base_url: str) -> tuple[str, tuple[str, str] | None]:
    """``base_url`` without its ``user:password@`` part, and that part (percent-decoded) if any."""
    try:
        parts = urllib.parse.urlsplit(base_url)
        host = parts.hostname
        port = parts.port
    except ValueError as exc:
        raise InvalidInput(f"base_url {mask_secrets(base_url)!r} is not a URL: {exc}") from None
    if parts.username is None and parts.password is None:
        return base_url, None
    netloc = host or ""
    if ":" in netloc:  # an IPv6 address
        netloc = f"[{netloc}]"
    if port is not None:
        netloc += f":{port}"
    clean = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    user = urllib.parse.unquote(parts.username or "")
    return clean, (user, urllib.parse.unquote(parts.password or ""))


def _read_key(env: str, path: str | os.PathLike[str] | None) -> str | None:
    if path is not None:
        where = f"the API key file {os.fspath(path)!r}"
        try:
            key = Path(path).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or type(exc).__name__
            raise InvalidInput(f"cannot read {where}: {reason}") from None
        if not key:
            raise InvalidInput(f"{where} is empty")
    else:
        where = f"the API key in ${env}"
        key = os.environ.get(env, "").strip()
        if not key:
            return None
    if not all(" " <= c <= "~" for c in key):
        # A line break or another control character would be refused by HTTP (and printed by the error
        # that says so): a key is printable ASCII.
        raise InvalidInput(
            f"{where} holds a line break, a control character or a non-ASCII character: an API key is "
            "printable ASCII on one line"
        )
    return key


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None if absent or unreadable."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return max(0.0, seconds) if math.isfinite(seconds) else None
