"""The database at head, read from ``ragstore/sql/schema.sql`` and ``ragstore/sql/functions/*.sql``.

``schema.sql`` has four parts, run in this order to build an empty database (:func:`build_statements`):
its section ``tables``, every function file, its section ``bindings`` (triggers and policies, which name the
functions) and its section ``grants``. The function files and section ``grants`` are *replaceable*: each is
re-applied by every ``ragstore migrate`` whose text differs from the one recorded in
``ragstore.applied_files`` (its SHA-256), so a function changes by editing its one file, without a revision.
Whenever anything is re-applied, section ``grants`` runs too: a function created by the migrating role then
goes to ``ragstore_owner`` and gets exactly its grants.

The migrations (``migrations/env.py`` and the baseline revision) call these; so do the tests that compare a
migrated database with one built from these files.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from ragstore.db.hybrid_text import expand

SQL_DIR = Path(__file__).resolve().parent.parent / "sql"
SCHEMA_FILE = SQL_DIR / "schema.sql"
FUNCTIONS_DIR = SQL_DIR / "functions"
SECTIONS = ("tables", "bindings", "grants")
# The name under which section "grants" is recorded in ragstore.applied_files.
GRANTS = "schema.sql:grants"
ROLES = ("ragstore_owner", "ragstore_app", "ragstore_reader")


@dataclass(frozen=True)
class Replaceable:
    """One replaceable text: a function file, or section ``grants`` of ``schema.sql``."""

    name: str
    text: str

    @property
    def sha256(self) -> bytes:
        return hashlib.sha256(self.text.encode("utf-8")).digest()

    def record(self) -> str:
        """The statement that records this text as applied (a literal: it is printed by ``migrate --sql`` too)."""
        # Section "grants" counts as applied only where the three roles exist (it did nothing without them).
        where = (
            f" WHERE (SELECT count(*) FROM pg_catalog.pg_roles WHERE rolname IN {ROLES}) = 3"
            if self.name == GRANTS
            else ""
        )
        return (
            "INSERT INTO ragstore.applied_files AS a (name, sha256) "
            f"SELECT '{self.name}', decode('{self.sha256.hex()}', 'hex'){where} "
            "ON CONFLICT (name) DO UPDATE SET sha256 = excluded.sha256, applied_at = now()"
        )


def section(name: str) -> str:
    """The statements of section ``name`` of ``schema.sql``, without the trailing semicolon."""
    if name not in SECTIONS:
        raise KeyError(name)
    text = SCHEMA_FILE.read_text(encoding="utf-8")
    start = text.index(f"-- section: {name}\n")
    end = text.find("-- section: ", start + 1)
    return text[start : end if end >= 0 else len(text)].strip().rstrip(";")


def functions() -> list[Replaceable]:
    """Every function file, by file name (``<function>.sql``), in name order; the hybrid statement put in
    where a file marks it (:func:`ragstore.db.hybrid_text.expand`), so its hash follows ``hybrid.sql`` too."""
    return [
        Replaceable(path.name, expand(path.read_text(encoding="utf-8")).strip().rstrip(";"))
        for path in sorted(FUNCTIONS_DIR.glob("*.sql"))
    ]


def grants() -> Replaceable:
    return Replaceable(GRANTS, section("grants"))


def replaceables() -> list[Replaceable]:
    """The function files, then section ``grants`` (which grants on the functions)."""
    return [*functions(), grants()]


def pending(applied: dict[str, bytes]) -> list[Replaceable]:
    """What a database that recorded ``applied`` (name -> SHA-256) must re-apply: every text that differs,
    and section ``grants`` after any of them."""
    changed = [r for r in replaceables() if applied.get(r.name) != r.sha256]
    if changed and changed[-1].name != GRANTS:
        changed.append(grants())
    return changed


def apply_statements(items: list[Replaceable]) -> list[str]:
    """The statements that apply ``items`` and record each. The bodies of SQL functions are checked when
    they run, not here (as pg_dump restores them): one may name a function of a later file."""
    statements = ["SET LOCAL check_function_bodies = off"]
    for item in items:
        statements += [item.text, item.record()]
    return [*statements, "SET LOCAL check_function_bodies TO DEFAULT"]


def build_statements(head: str | None) -> list[str]:
    """The statements that build an empty database, in order, each replaceable text recorded; stamped at
    revision ``head`` unless it is None (Alembic stamps it)."""
    statements = [section("tables"), *apply_statements(functions()), section("bindings")]
    if head is not None:
        statements.append(f"INSERT INTO ragstore.alembic_version (version_num) VALUES ('{head}')")
    return [*statements, grants().text, grants().record()]
