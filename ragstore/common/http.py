"""One JSON-over-HTTP endpoint, the client every HTTP provider of ragstore uses (embeddings, rerankers,
HyDE's chat model).

Policy: 408, 429, 5xx, timeouts and connection errors are retried with exponential backoff and jitter
(a Retry-After is honoured, capped at :data:`MAX_RETRY_AFTER`); other 4xx fail at once. The API key
comes from an environment variable or a file, is sent only as ``Authorization: Bearer``, and never
appears in a repr, a log line or a message: every provider word that reaches a message goes through
:func:`ragstore.errors.redact` with the key (and a URL password) as secrets, cut to a short excerpt. A
``user:password@`` in the URL is sent only as HTTP Basic ``Authorization`` to that host; the URL kept
and printed has no password.
"""

from __future__ import annotations

import base64
import email.utils
import json
import logging
import math
import os
import random
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from ragstore.common.endpoint import MAX_TIMEOUT
from ragstore.errors import BackendError, InvalidInput, mask_secrets, redact, without_secrets

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "EXCERPT",
    "MAX_RETRY_AFTER",
    "EndpointOptions",
    "JsonEndpoint",
    "parse_retry_after",
    "read_key",
    "split_credentials",
]

log = logging.getLogger(__name__)

# The longest a provider's Retry-After is honoured (seconds).
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


class EndpointOptions(TypedDict, total=False):
    """How a :class:`JsonEndpoint` reaches its service: the keyword arguments each HTTP client (the
    ``openai`` embedding backend, the reranker, HyDE) takes and passes on, every one optional.

    ``api_key_env`` / ``api_key_file``: where the API key is (the file wins; none is sent when neither is
    given or the variable is unset or empty); ``timeout``: seconds per attempt, a deadline from sending the
    request to the answer's last byte (30; finite, above 0, at most :data:`MAX_TIMEOUT`); ``max_retries``: retries
    after the first attempt (3); ``backoff``: the first retry's delay in seconds, doubled at each (0.5);
    ``sleep``, ``rng``, ``transport``: the clock, the jitter's random source and the HTTP transport (tests).
    """

    api_key_env: str | None
    api_key_file: str | os.PathLike[str] | None
    timeout: float
    max_retries: int
    backoff: float
    sleep: Callable[[float], None]
    rng: random.Random | None
    transport: httpx.BaseTransport | None


class JsonEndpoint:
    """``post(payload)`` to one URL: the decoded JSON of a 2xx answer, or BackendError (already redacted).

    ``what`` names the service in log lines ("reranker", "HyDE"); ``options`` are :class:`EndpointOptions`.
    """

    def __init__(self, url: str, *, what: str, **options: Unpack[EndpointOptions]) -> None:
        unknown = sorted(set(options) - EndpointOptions.__optional_keys__)
        if unknown:  # what Python says of a keyword argument the signature does not name
            raise TypeError(f"{what}: got an unexpected keyword argument {unknown[0]!r}")
        timeout = options.get("timeout", 30.0)
        max_retries = options.get("max_retries", 3)
        backoff = options.get("backoff", 0.5)
        api_key_env = options.get("api_key_env")
        api_key_file = options.get("api_key_file")
        if not url:
            raise InvalidInput(f"the {what} URL is required")
        check_timeout(timeout, what)
        if max_retries < 0 or backoff < 0:
            raise InvalidInput(f"{what}: retries and backoff must not be negative")
        clean, auth = split_credentials(url)
        if not clean.startswith(("http://", "https://")):
            raise InvalidInput(f"the {what} URL must start with http:// or https://, got {redact(clean, limit=80)!r}")
        self.url = clean
        self.what = what
        key = read_key(api_key_env or "", api_key_file) if (api_key_env or api_key_file is not None) else None
        self._has_key = bool(key)
        self._secrets: list[str] = [s for s in (key,) if s]
        if auth is not None:
            basic = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode("ascii")
            self._secrets += [s for s in (auth[1], basic) if s]
        self._timeout = float(timeout)
        self._max_retries = max_retries
        self._backoff = backoff
        self._sleep = options.get("sleep", time.sleep)
        self._rng = options.get("rng") or random.Random()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(timeout),
            transport=options.get("transport"),
            auth=httpx.BasicAuth(*auth) if auth is not None else None,
        )

    def __repr__(self) -> str:
        return f"JsonEndpoint(url={self.url!r}, api_key={'***' if self._has_key else None!r})"

    @property
    def has_key(self) -> bool:
        """True when an API key is sent (never the key itself)."""
        return self._has_key

    def close(self) -> None:
        self._client.close()

    def redact(self, text: str, limit: int | None = EXCERPT) -> str:
        """``text`` with no piece of the key or a URL password, one printable line, cut to ``limit``."""
        return redact(text, self._secrets, limit=limit)

    def post(self, payload: dict[str, Any]) -> Any:
        """POST ``payload`` with retries; the decoded JSON body of a 2xx answer, every text in it (keys
        too) without any piece of the key or URL password the request carried: what a provider quotes
        back of the request never reaches a caller, whichever field it lands in."""
        retrying = Retrying(
            stop=stop_after_attempt(self._max_retries + 1),
            wait=self._delay,
            retry=retry_if_exception_type(_Retryable),
            sleep=self._sleep,
            before_sleep=self._log_retry,
            reraise=True,
        )
        try:
            body = retrying(self._attempt, payload)
        except _Retryable as exc:
            attempts = retrying.statistics.get("attempt_number", self._max_retries + 1)
            raise BackendError(
                self.redact(f"{self.url} still failing after {attempts} attempts ({exc.problem})", None)
            ) from None
        except BackendError as exc:
            raise BackendError(self.redact(str(exc), None)) from None
        return _scrubbed(body, self._secrets) if self._secrets else body

    def _attempt(self, payload: dict[str, Any]) -> Any:
        """One attempt, ended at its deadline (``timeout`` seconds after it starts) whatever the provider
        does: the exchange runs on a daemon thread the caller stops waiting for at the deadline. httpx's
        own timeout bounds each read, not the whole answer, so a provider sending a byte at a time would
        otherwise hold the caller for as long as it likes; the abandoned exchange stops at its next read."""
        deadline = time.monotonic() + self._timeout
        outcome: list[Any] = []
        done = threading.Event()

        def run() -> None:
            try:
                outcome.append((True, self._exchange(payload, deadline)))
            except BaseException as exc:  # handed to the caller's thread
                outcome.append((False, exc))
            finally:
                done.set()

        threading.Thread(target=run, name="ragstore-http", daemon=True).start()
        if not done.wait(max(0.0, deadline - time.monotonic())) or not outcome:
            raise _Retryable(self._late())
        ok, value = outcome[0]
        if not ok:
            raise value
        return value

    def _late(self) -> str:
        return f"Timeout: no whole answer within the {self._timeout:g} s timeout"

    def _exchange(self, payload: dict[str, Any], deadline: float) -> Any:
        try:
            with self._client.stream("POST", self.url, json=payload) as streamed:
                pieces = []
                for piece in streamed.iter_bytes():
                    if time.monotonic() > deadline:  # the caller has stopped waiting: read no more
                        raise _Retryable(self._late())
                    pieces.append(piece)
            # The body read (already decoded from its Content-Encoding, which the copy's headers drop).
            headers = [(k, v) for k, v in streamed.headers.multi_items() if k.lower() != "content-encoding"]
            response = httpx.Response(
                streamed.status_code, headers=headers, content=b"".join(pieces), request=streamed.request
            )
        except httpx.ConnectTimeout as exc:
            raise _Retryable(f"{type(exc).__name__}: {self.redact(str(exc)) or 'no detail'}") from None
        except httpx.TimeoutException:  # a read or write outlasting the timeout: the same as the deadline
            raise _Retryable(self._late()) from None
        except httpx.TransportError as exc:  # connect/read/write errors
            raise _Retryable(f"{type(exc).__name__}: {self.redact(str(exc)) or 'no detail'}") from None
        except httpx.HTTPError as exc:
            raise BackendError(f"{self.url}: {type(exc).__name__}: {self.redact(str(exc))}") from None
        if response.is_success:
            try:
                return response.json()
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise BackendError(
                    f"{self.url} answered {response.status_code} with a body that is not JSON: "
                    f"{self.redact(response.text)!r}"
                ) from None
        status = response.status_code
        problem = f"HTTP {status}: {self._provider_message(response)}"
        if status not in _RETRY_STATUS and status < 500:
            raise BackendError(f"{self.url} refused the request ({problem})")
        raise _Retryable(problem, parse_retry_after(response.headers.get("Retry-After")))

    def _delay(self, state: RetryCallState) -> float:
        failure = state.outcome.exception() if state.outcome is not None else None
        retry_after = failure.retry_after if isinstance(failure, _Retryable) else None
        delay = self._backoff * 2 ** (state.attempt_number - 1)
        delay = min(retry_after, MAX_RETRY_AFTER) if retry_after is not None else delay
        return delay * (1.0 + 0.1 * self._rng.random())

    def _log_retry(self, state: RetryCallState) -> None:
        failure = state.outcome.exception() if state.outcome is not None else None
        problem = failure.problem if isinstance(failure, _Retryable) else "unknown"
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        log.info("%s request failed (%s); retry %d in %.2fs", self.what, problem, state.attempt_number, wait)

    def _provider_message(self, response: httpx.Response) -> str:
        """The provider's own words (``error.message``, ``detail``, ``message`` or the body's start)."""
        try:
            body = response.json()
        except ValueError:
            return self.redact(response.text.strip()) or response.reason_phrase
        message: Any = body
        if isinstance(body, dict):
            error = body.get("error", body.get("detail", body.get("message", body)))
            message = error.get("message", error) if isinstance(error, dict) else error
        return self.redact(str(message))


def check_timeout(timeout: object, what: str) -> float:
    """``timeout`` as seconds when it is a finite number above 0 and at most :data:`MAX_TIMEOUT`, else
    InvalidInput naming ``what``."""
    number = isinstance(timeout, int | float) and not isinstance(timeout, bool)
    if not number or not math.isfinite(timeout) or not 0 < timeout <= MAX_TIMEOUT:  # type: ignore[arg-type, operator]
        raise InvalidInput(
            f"{what}: the timeout must be a number of seconds above 0 and at most {MAX_TIMEOUT:g}, got {timeout!r}"
        )
    return float(timeout)  # type: ignore[arg-type]


def _scrubbed(value: Any, secrets: list[str]) -> Any:
    """``value`` (decoded JSON) with :func:`~ragstore.errors.without_secrets` applied to every text in it."""
    if isinstance(value, str):
        return without_secrets(value, secrets)
    if isinstance(value, list):
        return [_scrubbed(item, secrets) for item in value]
    if isinstance(value, dict):
        return {without_secrets(str(k), secrets): _scrubbed(v, secrets) for k, v in value.items()}
    return value


def split_credentials(base_url: str) -> tuple[str, tuple[str, str] | None]:
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


def read_key(env: str, path: str | os.PathLike[str] | None) -> str | None:
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


def parse_retry_after(value: str | None) -> float | None:
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
