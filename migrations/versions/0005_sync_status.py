"""sync status: the view ``ragstore.sync_status`` counts keys backing off apart from keys leased

A key a worker holds (leased, ``attempts`` 0) was counted as backing off; it is now in the new last column
``leased``, and ``backing_off`` counts only the keys of failed batches waiting for their retry. The same view
is in ``schema.sql``; the DDL is the frozen file ``sql/0005_sync_status.sql``. The downgrade re-applies the
grants (its view is made anew).

Revision ID: 0005_sync_status
Revises: 0004_api_tokens
Create Date: 2026-12-03
"""

from pathlib import Path

from alembic import op

from ragstore.db import schema

revision = "0005_sync_status"
down_revision = "0004_api_tokens"
branch_labels = None
depends_on = None

_SQL = Path(__file__).resolve().parent / "sql" / "0005_sync_status.sql"


def _section(name: str) -> str:
    text = _SQL.read_text(encoding="utf-8")
    start = text.index(f"-- section: {name}\n")
    end = text.find("-- section: ", start + 1)
    return text[start : end if end >= 0 else len(text)].strip().rstrip(";")


def upgrade() -> None:
    op.execute(_section("upgrade"))


def downgrade() -> None:
    op.execute(_section("downgrade"))
    for statement in schema.apply_statements([schema.grants()]):
        op.execute(statement)
