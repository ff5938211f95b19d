"""``ragstore vacuum [FAMILY] [--full]``: return to the disk the space deletes left in the tables.

A family drop removes its own table at once, but its rows in the tables every family shares
(``ragstore.chunks``, ``ragstore.chunk_terms``, ``ragstore.chunk_term_df``, ``ragstore.family_chunk_deltas``)
only become dead rows; a prune or ``ragstore delete`` leaves dead rows in the family's table as well.
Autovacuum later marks their space free for the next writes, but the files keep their size.

:func:`vacuum` runs ``VACUUM (ANALYZE)`` on the tables (one family's own and the shared ones, or with no
family every ragstore table): it frees dead rows and gives back the empty pages at the end of each file,
taking no lock that stops searches or writes. With ``full``, ``VACUUM (FULL, ANALYZE)`` rewrites each
table compactly and returns all its free space, holding an ACCESS EXCLUSIVE lock on it meanwhile (every
family's searches and writes wait for the shared tables), and needs room for the copy while it runs.

The owner side only (a superuser, or a member of ``ragstore_owner``): PermissionDenied otherwise, before
anything runs (PostgreSQL itself would only warn and skip). The report has each table's bytes before and
after, and the database's (``pg_total_relation_size``, ``pg_database_size``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import sql

from ragstore.db.connection import Conn, db_errors
from ragstore.db.sqlfiles import query
from ragstore.errors import PermissionDenied
from ragstore.families import get_family

__all__ = ["SHARED_TABLES", "VacuumReport", "vacuum"]

#: The tables that hold rows of every family: a drop or a delete leaves dead rows in each.
SHARED_TABLES = ("chunks", "chunk_terms", "chunk_term_df", "family_chunk_deltas")


@dataclass(frozen=True)
class VacuumReport:
    """Bytes of each table vacuumed, and of the database, before and after."""

    family: str | None
    full: bool
    tables: dict[str, tuple[int, int]]
    database: tuple[int, int]

    @property
    def reclaimed(self) -> int:
        """Bytes the tables gave back (never negative: a table may grow a little as ANALYZE runs)."""
        return max(0, sum(before - after for before, after in self.tables.values()))

    def as_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "full": self.full,
            "reclaimed_bytes": self.reclaimed,
            "database_bytes": {"before": self.database[0], "after": self.database[1]},
            "tables": {
                name: {"before": before, "after": after} for name, (before, after) in sorted(self.tables.items())
            },
        }


def vacuum(conn: Conn, family: str | None = None, *, full: bool = False) -> VacuumReport:
    """Vacuum ``family``'s table and the shared tables (every ragstore table when ``family`` is None); see
    the module docstring. Runs outside any transaction (VACUUM cannot run in one), with no statement
    timeout; the connection's autocommit and timeout are restored after.

    Raises PermissionDenied (not the owner side), NotFound (no such family), DatabaseUnavailable.
    """
    if not conn.autocommit:
        conn.rollback()
    autocommit = conn.autocommit
    conn.autocommit = True
    try:
        with db_errors():
            row = conn.execute(query("vacuum", "may_maintain")).fetchone()
            if row is None or not row[1]:
                who = row[0] if row else "?"
                raise PermissionDenied(
                    f"permission denied: role {who!r} may not vacuum the ragstore tables; run `ragstore vacuum` "
                    "as a member of ragstore_owner or a superuser"
                )
            tables = _tables(conn, family)
            before, db_before = _sizes(conn, tables)
            timeout = conn.execute("SELECT current_setting('statement_timeout')").fetchone()
            conn.execute("SELECT set_config('statement_timeout', '0', false)")
            try:
                block = sql.SQL(query("vacuum", "vacuum_full" if full else "vacuum"))
                for table in tables:
                    conn.execute(block.format(table=sql.Identifier(table)))
            finally:
                conn.execute("SELECT set_config('statement_timeout', %s, false)", (timeout[0] if timeout else "0",))
            after, db_after = _sizes(conn, tables)
    finally:
        conn.autocommit = autocommit
    sizes = {t: (before[t], after[t]) for t in tables}
    return VacuumReport(family=family, full=full, tables=sizes, database=(db_before, db_after))


def _tables(conn: Conn, family: str | None) -> list[str]:
    if family is None:
        return [str(r[0]) for r in conn.execute(query("vacuum", "all_tables")).fetchall()]
    fam = get_family(conn, family)
    own = [fam.table]
    target = fam.options.get("target")
    if isinstance(target, dict) and isinstance(target.get("table"), str):
        own.append(target["table"])
    return own + list(SHARED_TABLES)


def _sizes(conn: Conn, tables: list[str]) -> tuple[dict[str, int], int]:
    rows = conn.execute(query("vacuum", "sizes"), {"tables": tables}).fetchall()
    sizes = {str(name): int(size) for name, size in rows if name is not None}
    database = next(int(size) for name, size in rows if name is None)
    return sizes, database
