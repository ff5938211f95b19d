"""Which database roles act for which memory agent: the owner's bindings in ``ragstore.agent_principals``.

A session acts for agent ``A`` when its ``current_user`` has the privileges of a role bound to ``A``
(that role itself, or a member of it): row-level security on ``ragstore.memory``,
``ragstore.memory_embeddings`` and ``ragstore.memory_forget_log`` reads the bindings through
``current_user``, never through a setting the caller can change. Only the owner side (members of
``ragstore_owner``, superusers) writes bindings; the app and reader roles may read them.

Errors: :class:`~ragstore.errors.InvalidInput` for a malformed agent id or a blank role,
:class:`~ragstore.errors.NotFound` for a role that does not exist (grant) or a binding that does not
(revoke), :class:`~ragstore.errors.PermissionDenied` for a role that is not the owner's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from ragstore.db.connection import Conn, db_errors
from ragstore.db.sqlfiles import query
from ragstore.errors import InvalidInput, NotFound
from ragstore.memory.bundle import JsonForm
from ragstore.memory.models import AGENT_ID_PATTERN

__all__ = ["Principal", "grant_agent", "list_principals", "revoke_agent"]

_AGENT = re.compile(AGENT_ID_PATTERN)


@dataclass(frozen=True, slots=True)
class Principal(JsonForm):
    """One binding: ``role`` acts for ``agent``; granted by the login role ``granted_by`` at ``granted_at``."""

    agent: str
    role: str
    granted_by: str
    granted_at: datetime
    role_exists: bool


def _check(agent: str, role: str) -> None:
    if not _AGENT.fullmatch(agent):
        raise InvalidInput(f"invalid agent id {agent!r}: 1-64 of A-Z a-z 0-9 _ . -")
    if not role.strip():
        raise InvalidInput("a role name is required (--role)")


def grant_agent(conn: Conn, agent: str, role: str) -> bool:
    """Bind ``agent`` to the database role ``role``; False when the binding existed already. Commits."""
    _check(agent, role)
    with db_errors(), conn.transaction():
        row = conn.execute(query("memory", "role_exists"), {"role": role}).fetchone()
        if not row or not row[0]:
            raise NotFound(f"no database role named {role!r} (create it first, e.g. CREATE ROLE ... LOGIN)")
        added = conn.execute(query("memory", "grant_agent"), {"agent": agent, "role": role}).fetchone()
    return added is not None


def revoke_agent(conn: Conn, agent: str, role: str) -> None:
    """Remove the binding of ``agent`` to ``role``; NotFound when there is none. Commits."""
    _check(agent, role)
    with db_errors(), conn.transaction():
        row = conn.execute(query("memory", "revoke_agent"), {"agent": agent, "role": role}).fetchone()
    if row is None:
        raise NotFound(f"agent {agent!r} is not bound to role {role!r}")


def list_principals(conn: Conn, agent: str | None = None) -> list[Principal]:
    """Every binding (of ``agent`` only, when given), by agent then role."""
    with db_errors(), conn.transaction():
        rows = conn.execute(query("memory", "list_principals"), {"agent": agent}).fetchall()
    return [Principal(str(a), str(r), str(by), at, bool(exists)) for a, r, by, at, exists in rows]
