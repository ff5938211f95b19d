"""The exceptions ragstore raises.

Every error the library raises on purpose is a :class:`RagstoreError`; the CLI catches that one
class in one place and prints its message on one line. Subclasses say what the caller does next::

    RagstoreError
    ├── InvalidInput          bad input: fix the file, line, field or option it names
    │   └── ModelMismatch     a vector or query from another embedding space than the family's
    ├── NotFound              an unknown family, record or file
    ├── Conflict              the thing exists already, or the store is in a state that refuses the call
    ├── PermissionDenied      the database role may not do this (docs/guide/roles.md)
    ├── BackendError          an embedding backend failed (HTTP provider, model files)
    ├── DatabaseUnavailable   Postgres cannot be reached or went away
    │   └── Timeout           a statement ran past its statement_timeout
    └── SchemaError           the database is not migrated to the version this code needs

One warning, not an error (the call returns its answer): :class:`FingerprintVectorsWarning`, issued with
:func:`warnings.warn` by a search that ranks by the vectors of a family of the ``offline`` backend, whose
16-d fingerprints carry no meaning. The CLI prints it as one ``note:`` line.

psycopg errors are mapped to these at one boundary (:func:`ragstore.db.connection.map_db_error`).

Every message passes through :func:`mask_secrets`: a password in a URL or a DSN, or an Authorization
header, never reaches a message, whoever wrote it. :func:`redact` also removes every piece of a known
secret (an API key) in any of its escaped forms.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Iterable

MASK = "***"
# A secret shorter than this is removed only where it appears whole; from a longer one, every run of at
# least this many of its characters is removed (a provider echoing part of a key leaks that part).
MIN_SECRET_PIECE = 4
# scheme://user:password@host: the password runs to the last "@" before a space or a quote, so a password
# holding "@" or "/" is masked whole.
_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/?#@'\"<>]*:)([^\s'\"<>]*)(@)")
_KV_PASSWORD = re.compile(r"(password\s*=\s*)('[^']*'|\S+)", re.IGNORECASE)
_AUTH_HEADER = re.compile(
    r"((?:authorization|proxy-authorization|x-api-key|api-key)[\"']?\s*[:=]\s*[\"']?)"
    r"(?:(?:bearer|basic|token)\s+)?[^\s\"',;}]+",
    re.IGNORECASE,
)
_SCHEME_TOKEN = re.compile(r"\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{4,}", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def mask_secrets(text: str) -> str:
    """``text`` with every URL or DSN password and every Authorization header value replaced by ``***``.

    Covers ``scheme://user:password@host`` (any scheme), ``password=...`` (DSN keyword form, quoted or
    not), ``Authorization: Bearer ...``-style headers (also as JSON or dict items) and bare
    ``Bearer``/``Basic`` credentials.
    """
    text = _URL_PASSWORD.sub(rf"\g<1>{MASK}\g<3>", text)
    text = _KV_PASSWORD.sub(rf"\g<1>{MASK}", text)
    text = _AUTH_HEADER.sub(rf"\g<1>{MASK}", text)
    return _SCHEME_TOKEN.sub(rf"\g<1>\g<2>{MASK}", text)


def escape_controls(text: str) -> str:
    """Control characters (line breaks, escapes, NUL ...) written as ``\\n``, ``\\x1b``: one printable line."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def _forms(secret: str) -> set[str]:
    """The spellings a secret takes when echoed: as is, JSON- or Python-escaped, percent-encoded."""
    return {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        secret.encode("unicode_escape").decode("ascii"),
        repr(secret)[1:-1],
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote_plus(secret, safe=""),
    } - {""}


def _cut(text: str, secret: str) -> str:
    """``text`` with every run of ``MIN_SECRET_PIECE`` or more characters of ``secret`` replaced by ``***``.

    Case-insensitive. A position is covered when the ``MIN_SECRET_PIECE`` characters starting there occur
    in the secret; covered positions that touch or overlap form one masked run.
    """
    low, needle = text.lower(), secret.lower()
    if len(needle) < MIN_SECRET_PIECE:
        return re.sub(re.escape(needle), MASK, text, flags=re.IGNORECASE)
    grams = {needle[i : i + MIN_SECRET_PIECE] for i in range(len(needle) - MIN_SECRET_PIECE + 1)}
    covered = [False] * len(text)
    for i in range(len(text) - MIN_SECRET_PIECE + 1):
        if low[i : i + MIN_SECRET_PIECE] in grams:
            covered[i : i + MIN_SECRET_PIECE] = [True] * MIN_SECRET_PIECE
    out: list[str] = []
    i = 0
    while i < len(text):
        if covered[i]:
            while i < len(text) and covered[i]:
                i += 1
            out.append(MASK)
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def redact(text: str, secrets: Iterable[str | None] = (), *, limit: int | None = None) -> str:
    """``text`` made safe to show: no piece of any of ``secrets``, no password, one printable line.

    Every run of four or more characters of a secret (in any of its escaped spellings, any case) becomes
    ``***``; then :func:`mask_secrets`; control characters are escaped; with ``limit``, the text is cut
    to that many characters first (an excerpt of a provider's body).
    """
    if limit is not None and len(text) > limit:
        text = text[:limit] + "..."
    known = [s for s in secrets if s]
    for _ in range(2):  # before and after escaping: a secret's escaped spelling appears only after it
        for secret in known:
            for form in _forms(secret):
                text = _cut(text, form)
        text = escape_controls(text)
    return mask_secrets(text)


def without_secrets(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every run of four or more characters of any of ``secrets`` (in any of its escaped
    spellings, any case) replaced by ``***``, and nothing else changed: for a provider's answer that is
    kept or printed as data (a hypothetical passage), not as a message."""
    for secret in secrets:
        if secret:
            for form in _forms(secret):
                text = _cut(text, form)
    return text


class RagstoreError(Exception):
    """Root of every error ragstore raises on purpose. Its message never shows a password."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(mask_secrets(a) if isinstance(a, str) else a for a in args))


class InvalidInput(RagstoreError, ValueError):
    """Bad input; the message names the file, line and field, or the option."""


class ModelMismatch(InvalidInput):
    """A vector or a query from another embedding space (backend, model or dimension) than the family's."""


class NotFound(RagstoreError, LookupError):
    """An unknown family, record or file."""


class Conflict(RagstoreError):
    """The object exists already, or the store's state refuses the operation."""


class PermissionDenied(RagstoreError, PermissionError):
    """The connected role lacks a privilege (e.g. ragstore_reader writing, ragstore_app altering the schema)."""


class BackendError(RagstoreError):
    """An embedding backend failed."""


class DatabaseUnavailable(RagstoreError):
    """Postgres cannot be reached, refused the connection, or went away mid-query."""


class Timeout(DatabaseUnavailable):
    """A statement was cancelled by statement_timeout."""


class FingerprintVectorsWarning(UserWarning):
    """A search ranked by the vectors of an ``offline`` family: fingerprints of the text, not meanings, so
    its vector scores say how alike two texts' characters are, not what they mean."""


class StorageRecallWarning(UserWarning):
    """A family created in a storage (``bit``) whose measured recall@10 fell short somewhere: the figures,
    and what to do (``ragstore check-recall`` once loaded; a wider rerank factor or ``halfvec``). The same
    text ``ragstore family create`` prints as its note."""


class SchemaError(RagstoreError):
    """The database schema is missing or older than this code needs: run `ragstore migrate`."""
