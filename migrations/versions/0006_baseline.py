"""baseline: the ragstore schema of ragstore/sql/schema.sql and ragstore/sql/functions/

One revision replaces the two chains that built the schema before version 0.1.0 was released: the nineteen
revisions 0001 to 0022, then 0001_baseline to 0005_sync_status. The schema at head is
``ragstore/sql/schema.sql`` and the functions are one file each under ``ragstore/sql/functions/``, re-applied
by every ``ragstore migrate`` whose text changed (``ragstore/db/schema.py``); ``migrations/env.py`` builds an
empty database from them directly and stamps it at the newest revision.

The rule for a change after this one:

- a function or its grants: edit its file (``ragstore/sql/functions/<name>.sql``, section ``grants`` of
  ``schema.sql``); no revision;
- a table, index, trigger or policy: a new revision on top of the newest (``down_revision`` its id), whose
  DDL is in one frozen file ``migrations/versions/sql/NNNN_name.sql``, AND the same change made to
  ``schema.sql``. ``tests/integration/test_schema.py`` compares the catalog of a migrated database with one
  built from ``schema.sql``: forgetting either half fails it.

A database made by a replaced revision is upgraded in place, data kept, by :func:`upgrade_old`: one at
0005_sync_status (the same schema) is re-stamped; one at 0001_baseline to 0004_api_tokens gets what the later
revisions did (the frozen sections ``after_*``); one at 0020, 0021 or 0022 is bridged to 0001_baseline first.
One older than 0020 is refused with the way forward (CHANGELOG.md).

Revision ID: 0006_baseline
Revises:
Create Date: 2026-12-03
"""

from pathlib import Path
from typing import Any

from alembic import op

from ragstore.db import schema

revision = "0006_baseline"
down_revision = None
branch_labels = None
depends_on = None

_SQL = Path(__file__).resolve().parent / "sql" / "0006_baseline.sql"
# The revisions of the first chain a database may be at and still be bridged to 0001_baseline, newest last.
BRIDGED = ("0020", "0021", "0022")
# The revisions of the second chain, in order: a database at one gets the sections after_<id> from its own on.
SQUASHED = ("0001_baseline", "0002_family_views", "0003_sync", "0004_api_tokens", "0005_sync_status")
# Every revision of the old chain, so a database at an older one is told what to do rather than "unknown".
OLD_CHAIN = ("0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009", "0010", "0011", "0012", "0013",
             "0016", "0017", "0018", *BRIDGED)  # fmt: skip


def _section(name: str) -> str:
    text = _SQL.read_text(encoding="utf-8")
    start = text.index(f"-- section: {name}\n")
    end = text.find("-- section: ", start + 1)
    return text[start : end if end >= 0 else len(text)].strip().rstrip(";")


def upgrade_old(execute: Any, old: str) -> None:
    """Bring a database at revision ``old`` (one of :data:`BRIDGED` or :data:`SQUASHED`) to this baseline.

    ``execute`` runs one SQL text (``context.execute`` of env.py). Tables and data stay. From 0020-0022,
    what 0021 and 0022 changed is applied where ``old`` precedes them, which brings it to 0001_baseline; then
    what each revision after ``old`` did (sections ``after_*``); then, unless ``old`` is the last of
    :data:`SQUASHED`, every function file and section ``grants`` (they are head).
    """
    assert old in BRIDGED or old in SQUASHED, old
    if old in BRIDGED:
        execute(_section("bridge_applied_files"))
        if old == "0020":
            execute(_section("bridge_0021_before"))
        if old in ("0020", "0021"):
            execute(_section("bridge_0022"))
        for statement in schema.apply_statements(schema.replaceables()):
            execute(statement)
        if old == "0020":
            execute(_section("bridge_0021_after"))
        old = SQUASHED[0]
    for done in SQUASHED[SQUASHED.index(old) : -1]:
        execute(_section(f"after_{done}"))
    if old != SQUASHED[-1]:
        for statement in schema.apply_statements(schema.replaceables()):
            execute(statement)
    execute(_section("stamp"))


def upgrade() -> None:
    # Reached only from an empty database with no later revision (env.py builds such a database itself).
    for statement in schema.build_statements(None):
        op.execute(statement)


def downgrade() -> None:
    op.execute(_section("downgrade"))
