"""baseline: the ragstore schema of ragstore/sql/schema.sql and ragstore/sql/functions/

One revision replaces the nineteen (0001 to 0022) that built the schema before version 0.1.0 was released.
The schema at head is ``ragstore/sql/schema.sql`` and the functions are one file each under
``ragstore/sql/functions/``, re-applied by every ``ragstore migrate`` whose text changed
(``ragstore/db/schema.py``); ``migrations/env.py`` builds an empty database from them directly and stamps it
at the newest revision.

The rule for a change after this one:

- a function or its grants: edit its file (``ragstore/sql/functions/<name>.sql``, section ``grants`` of
  ``schema.sql``); no revision;
- a table, index, trigger or policy: a new revision on top of the newest (``down_revision`` its id), whose
  DDL is in one frozen file ``migrations/versions/sql/NNNN_name.sql``, AND the same change made to
  ``schema.sql``. ``tests/integration/test_schema.py`` builds a database at this baseline, upgrades it
  through the revisions and compares its catalog with one built from ``schema.sql``: forgetting either
  half fails it.

A database at one of the last revisions of the old chain (0020, 0021, 0022) is brought here in place by
:func:`bridge`, data kept; an older one is refused with the way forward (CHANGELOG.md).

Revision ID: 0001_baseline
Revises:
Create Date: 2026-12-02
"""

from pathlib import Path
from typing import Any

from alembic import op

from ragstore.db import schema

revision = "0001_baseline"
down_revision = None
branch_labels = None
depends_on = None

_SQL = Path(__file__).resolve().parent / "sql" / "0001_baseline.sql"
# The revisions of the old chain a database may be at and still be bridged here, newest last.
BRIDGED = ("0020", "0021", "0022")
# Every revision of the old chain, so a database at an older one is told what to do rather than "unknown".
OLD_CHAIN = ("0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009", "0010", "0011", "0012", "0013",
             "0016", "0017", "0018", *BRIDGED)  # fmt: skip


def _section(name: str) -> str:
    text = _SQL.read_text(encoding="utf-8")
    start = text.index(f"-- section: {name}\n")
    end = text.find("-- section: ", start + 1)
    return text[start : end if end >= 0 else len(text)].strip().rstrip(";")


def bridge(execute: Any, old: str) -> None:
    """Bring a database of the old chain at revision ``old`` (one of :data:`BRIDGED`) to this baseline.

    ``execute`` runs one SQL text (``context.execute`` of env.py). Tables and data stay; what 0021 and 0022
    changed is applied where ``old`` precedes them; every function file and section ``grants`` are applied
    and recorded (they are head, and were the same at 0022).
    """
    assert old in BRIDGED, old
    execute(_section("bridge_applied_files"))
    if old == "0020":
        execute(_section("bridge_0021_before"))
    if old in ("0020", "0021"):
        execute(_section("bridge_0022"))
    for statement in schema.apply_statements(schema.replaceables()):
        execute(statement)
    if old == "0020":
        execute(_section("bridge_0021_after"))
    execute(_section("bridge_stamp"))


def upgrade() -> None:
    # Reached only from an empty database with no later revision (env.py builds such a database itself).
    for statement in schema.build_statements(None):
        op.execute(statement)


def downgrade() -> None:
    op.execute(_section("downgrade"))
