"""bm25: full-text postings (ragstore.chunk_terms) kept by triggers, BM25 in the SQL search functions

The SQL lives next to this file, in sql/0012_bm25.sql (sections "upgrade" and "downgrade"); the
downgrade then re-runs 0010's definitions of the functions this revision replaced.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from pathlib import Path

from alembic import op

from ragstore.db.frozen import function_definition, section

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_SQL = Path(__file__).resolve().parent / "sql"
# 0010's functions that 0012 replaces: restored from that frozen file on downgrade.
_REPLACED = ("chunks_count_inserted", "chunks_count_deleted", "hybrid_search", "fts_search")


def upgrade() -> None:
    op.execute(section(_SQL / "0012_bm25.sql", "upgrade"))


def downgrade() -> None:
    op.execute(section(_SQL / "0012_bm25.sql", "downgrade"))
    older = (_SQL / "0010_fusion.sql").read_text(encoding="utf-8")
    for name in _REPLACED:
        op.execute(function_definition(older, name))
