"""search functions for SQL users: ragstore.search(family, vector, k), ragstore.search_text(family, text, k)

The SQL is the frozen file sql/0002_search.sql next to this script (a later change is a new revision);
sql/search.sql at the top of the repository holds the same functions for people.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from pathlib import Path

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# The frozen text of this revision; sql/ holds the same functions for people (a test checks so).
UPGRADE = (Path(__file__).parent / "sql" / "0002_search.sql").read_text(encoding="utf-8")

DOWNGRADE = r"""
DROP FUNCTION IF EXISTS ragstore.search_text(text, text, integer);
DROP FUNCTION IF EXISTS ragstore.search(text, vector, integer);
"""


def upgrade() -> None:
    op.execute(UPGRADE.strip().rstrip(";"))


def downgrade() -> None:
    op.execute(DOWNGRADE.strip().rstrip(";"))
