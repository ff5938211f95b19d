"""metadata index without a pending list: every family's GIN index on its metadata copy gets
``fastupdate = off``

With GIN's default ``fastupdate = on``, rows written since the last VACUUM sit in the index's pending list
(up to ``gin_pending_list_limit``, 4 MB), which every metadata-filtered search reads whole before its
index scan. A family written by ragstore's writer and searched before autovacuum came by paid for that on
every query. With it off, a write inserts into the index itself (a little more work per write) and a search
reads only the entries of its filter. The pending list each index has now is merged into it.

The statements are in ``sql/0013_metadata_index_fastupdate.sql`` next to this file.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01
"""

from pathlib import Path

from alembic import op

from ragstore.db.frozen import section

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_SQL = Path(__file__).resolve().parent / "sql" / "0013_metadata_index_fastupdate.sql"


def upgrade() -> None:
    op.execute(section(_SQL, "upgrade"))


def downgrade() -> None:
    op.execute(section(_SQL, "downgrade"))
