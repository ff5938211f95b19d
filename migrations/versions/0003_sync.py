"""sync: the tables of ``ragstore sync`` (sync_sources, sync_queue, sync_rows) and the view sync_status

The function that queues changed keys (``ragstore/sql/functions/sync_enqueue.sql``) and the grants are
replaceable texts that ``ragstore migrate`` applies after this revision; the triggers on followed tables
are installed by ``ragstore sync add`` (``ragstore/sql/sync.sql``).

Revision ID: 0003_sync
Revises: 0002_family_views
Create Date: 2026-12-03
"""

from pathlib import Path

from alembic import op

from ragstore.db import schema

revision = "0003_sync"
down_revision = "0002_family_views"
branch_labels = None
depends_on = None

_SQL = Path(__file__).resolve().parent / "sql" / "0003_sync.sql"


def _section(name: str) -> str:
    text = _SQL.read_text(encoding="utf-8")
    start = text.index(f"-- section: {name}\n")
    end = text.find("-- section: ", start + 1)
    return text[start : end if end >= 0 else len(text)].strip().rstrip(";")


def upgrade() -> None:
    op.execute(_section("upgrade"))
    # The trigger function and section grants at head (as the baseline's bridge does): a database bridged
    # from the old chain applied grants before these tables existed, when its sync part did nothing, and a
    # downgrade below this revision dropped the function; both are applied now.
    enqueue = [item for item in schema.functions() if item.name == "sync_enqueue.sql"]
    for statement in schema.apply_statements([*enqueue, schema.grants()]):
        op.execute(statement)


def downgrade() -> None:
    op.execute(_section("downgrade"))
