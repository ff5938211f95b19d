"""family sources: which folder (root path and host) last wrote each package prefix of a family

The SQL lives next to this file, in sql/0022_family_sources.sql (sections "upgrade" and "downgrade").

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-02
"""

from pathlib import Path

from alembic import op

from ragstore.db.frozen import section

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

_SQL = Path(__file__).resolve().parent / "sql" / "0022_family_sources.sql"


def upgrade() -> None:
    op.execute(section(_SQL, "upgrade"))


def downgrade() -> None:
    op.execute(section(_SQL, "downgrade"))
