"""term df and hybrid function: each word's document frequency kept by the chunk triggers (BM25 reads the
postings once); ragstore.hybrid_search in the shape of the CLI's statement, 20 per leg by default

The SQL lives next to this file, in sql/0017_term_df.sql (sections "upgrade" and "downgrade"); the
downgrade then re-runs the definitions of the functions this revision replaced.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-01
"""

from pathlib import Path

from alembic import op

from ragstore.db.frozen import function_definition, section

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

_SQL = Path(__file__).resolve().parent / "sql"
# The functions this revision replaces, restored on downgrade from the frozen file that last defined each.
_REPLACED = (
    ("0012_bm25.sql", "fts_scores"),
    ("0012_bm25.sql", "chunks_count_inserted"),
    ("0012_bm25.sql", "chunks_terms_updated"),
    ("0012_bm25.sql", "hybrid_search"),
    ("0016_postings_without_fk.sql", "chunks_count_deleted"),
    ("0016_postings_without_fk.sql", "chunks_count_truncated"),
)


def upgrade() -> None:
    op.execute(section(_SQL / "0017_term_df.sql", "upgrade"))


def downgrade() -> None:
    for file, name in _REPLACED:
        op.execute(function_definition((_SQL / file).read_text(encoding="utf-8"), name))
    op.execute(section(_SQL / "0017_term_df.sql", "downgrade"))
