"""definer audit: the full-text statistics written by the chunk triggers alone (ragstore.chunk_term_df_add
folded into them and dropped; no DML on them for the app), removed whole with their family by a trigger on
ragstore.families (which also makes a family drop one bulk delete per table), every SECURITY DEFINER
function's search_path ending in pg_temp, and the search functions refusing a NULL query

The SQL lives next to this file, in sql/0021_definer_audit.sql (sections "upgrade" and "downgrade"); the
downgrade re-runs the definitions this revision replaced, from the frozen files that last defined each,
then its section.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-02
"""

from pathlib import Path

from alembic import op

from ragstore.db.frozen import function_definition, section

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

_SQL = Path(__file__).resolve().parent / "sql"
# The functions this revision replaces (or drops), restored on downgrade from the frozen file that last
# defined each.
_REPLACED = (
    ("0007_family_chunks.sql", "search"),
    ("0008_identity.sql", "family_bulk_drop_hnsw"),
    ("0008_identity.sql", "family_bulk_cluster"),
    ("0008_identity.sql", "family_build_hnsw"),
    ("0012_bm25.sql", "fts_top"),
    ("0017_term_df.sql", "hybrid_search"),
    ("0017_term_df.sql", "chunks_count_truncated"),
    ("0017_term_df.sql", "chunk_term_df_add"),
    ("0018_postings_one_index.sql", "chunks_count_deleted"),
    ("0018_postings_one_index.sql", "chunks_terms_updated"),
    ("0020_postings_one_statement.sql", "chunks_count_inserted"),
)


def upgrade() -> None:
    op.execute(section(_SQL / "0021_definer_audit.sql", "upgrade"))


def downgrade() -> None:
    for file, name in _REPLACED:
        op.execute(function_definition((_SQL / file).read_text(encoding="utf-8"), name))
    op.execute(section(_SQL / "0021_definer_audit.sql", "downgrade"))
