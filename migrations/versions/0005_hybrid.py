"""hybrid search for SQL users: ragstore.hybrid_search(family, query_text, query_vector, k)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30

The same fusion as ragstore/sql/hybrid.sql (block ``hybrid``) with its defaults: each leg's top 50,
RRF k 60, equal weights, the IDF-weighted ts_rank_cd score (normalisation 2) of ragstore.search.fts, a
plain-words query matching any of its words. The SQL is the frozen file sql/0005_hybrid.sql next to this
script; sql/hybrid.sql at the top of the repository holds the same function for people, with psql examples.
"""

from pathlib import Path

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# The frozen text of this revision; sql/ holds the same functions for people (a test checks so).
UPGRADE = (Path(__file__).parent / "sql" / "0005_hybrid.sql").read_text(encoding="utf-8")

DOWNGRADE = r"""
DROP FUNCTION IF EXISTS ragstore.hybrid_search(text, text, vector, integer)
"""


def upgrade() -> None:
    op.execute(UPGRADE.strip().rstrip(";"))


def downgrade() -> None:
    op.execute(DOWNGRADE.strip().rstrip(";"))
