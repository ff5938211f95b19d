"""Bearer tokens: each maps to a database role, and a request with it runs as that role.

A token reads ``rst_<id>_<secret>``: ``id`` finds its row of ``ragstore.api_tokens``, which keeps the
SHA-256 of ``secret`` only, and the presented secret's hash is compared with it by
:func:`hmac.compare_digest`. The secret is printed once, by :func:`create`, and is never stored or logged.
Creating, listing, revoking and reading them are the owner side's: the table grants nothing to
``ragstore_app`` or ``ragstore_reader``, so a server logs in as a member of ``ragstore_owner`` (and of
each token's role, which its requests run as).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from ragstore.db.connection import map_db_error
from ragstore.db.sqlfiles import query
from ragstore.errors import InvalidInput, NotFound

PREFIX = "rst_"
GROUP_ROLES = ("ragstore_reader", "ragstore_app", "ragstore_owner")
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_TOKEN = re.compile(r"rst_([1-9][0-9]{0,18})_([A-Za-z0-9_-]{16,128})")


@dataclass(frozen=True)
class TokenInfo:
    """One row of ``ragstore token list`` (never the secret)."""

    id: int
    name: str
    role: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "role": self.role,
            "created_at": self.created_at.isoformat(),
            "last_used_at": self.last_used_at.isoformat() if self.last_used_at else None,
            "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
        }


@dataclass(frozen=True)
class NewToken:
    id: int
    name: str
    role: str
    token: str


def digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8")).digest()


def parse(token: str) -> tuple[int, str] | None:
    """``(id, secret)`` of a well-formed token, None for anything else."""
    match = _TOKEN.fullmatch(token)
    if match is None:
        return None
    return int(match.group(1)), match.group(2)


def matches(stored_sha256: bytes, secret: str) -> bool:
    """Whether ``secret`` hashes to ``stored_sha256``, compared in constant time."""
    return hmac.compare_digest(bytes(stored_sha256), digest(secret))


def _check_role(conn: psycopg.Connection[Any], role: str) -> None:
    row = conn.execute(query("tokens", "role_check"), {"role": role}).fetchone()
    if row is None:
        raise NotFound(f"role {role!r} does not exist; create it (docs/guide/roles.md) or use one of {GROUP_ROLES}")
    superuser, member = row
    if superuser:
        raise InvalidInput(f"role {role!r} is a superuser: a token's role must not bypass the database's rules")
    if not member:
        raise InvalidInput(f"role {role!r} is not a member of any of {', '.join(GROUP_ROLES)}")


def create(conn: psycopg.Connection[Any], role: str, name: str | None = None) -> NewToken:
    """Make a token for ``role`` (named ``name``, default the role's name) and return it with its secret,
    the only time the secret is seen. Committed on ``conn``."""
    name = name if name is not None else role
    if not _NAME.fullmatch(name):
        raise InvalidInput(f"token name {name!r}: 1 to 64 letters, digits, '_', '.' or '-'")
    secret = secrets.token_urlsafe(32)
    try:
        with conn.transaction():
            _check_role(conn, role)
            row = conn.execute(
                query("tokens", "insert"), {"name": name, "role": role, "sha256": digest(secret)}
            ).fetchone()
    except psycopg.errors.UniqueViolation:
        raise InvalidInput(f"a token named {name!r} exists already; revoke it or choose another --name") from None
    except psycopg.Error as exc:
        map_db_error(exc)
    assert row is not None
    return NewToken(id=int(row[0]), name=name, role=role, token=f"{PREFIX}{row[0]}_{secret}")


def list_tokens(conn: psycopg.Connection[Any]) -> list[TokenInfo]:
    try:
        rows = conn.execute(query("tokens", "list")).fetchall()
    except psycopg.Error as exc:
        map_db_error(exc)
    return [TokenInfo(*row) for row in rows]


def revoke(conn: psycopg.Connection[Any], name_or_id: str) -> TokenInfo:
    """Revoke the live token named ``name_or_id`` (or with that id); NotFound when there is none."""
    token_id = int(name_or_id) if name_or_id.isdigit() and len(name_or_id) < 19 else None
    try:
        with conn.transaction():
            row = conn.execute(query("tokens", "revoke"), {"name": name_or_id, "id": token_id}).fetchone()
    except psycopg.Error as exc:
        map_db_error(exc)
    if row is None:
        raise NotFound(f"no live token named or numbered {name_or_id!r} (ragstore token list)")
    return next(t for t in list_tokens(conn) if t.id == row[0])


# Seconds between two marks of a token as used by one server (the statement itself marks at most once a
# minute; this spares the round trip of asking).
MARK_EVERY = 60.0


async def authenticate(
    conn: psycopg.AsyncConnection[Any], token: str, marked: dict[int, float] | None = None
) -> str | None:
    """The database role of ``token``, or None when it is malformed, unknown, revoked or wrong: one
    lookup, every request (so a revocation holds from the next request on). Marks it used at most once a
    minute; ``marked`` (token id to ``time.monotonic()`` of the last mark, kept by the caller) saves the
    statement in between. ``conn`` is the server's own (its login role), in autocommit."""
    parsed = parse(token)
    if parsed is None:
        return None
    token_id, secret = parsed
    cursor = await conn.execute(query("tokens", "lookup"), {"id": token_id})
    row = await cursor.fetchone()
    if row is None or not matches(row[1], secret):
        return None
    now = time.monotonic()
    if marked is None or now - marked.get(token_id, -MARK_EVERY) >= MARK_EVERY:
        await conn.execute(query("tokens", "used"), {"id": token_id})
        if marked is not None:
            marked[token_id] = now
    return str(row[0])
