"""postings with one index: the delete and text-change triggers find a chunk's postings through the
primary key (the terms of the old row's tsv), so ragstore.chunk_terms loses its (family, chunk_id) index

The SQL lives next to this file, in sql/0018_postings_one_index.sql (sections "upgrade" and "downgrade");
the downgrade re-creates the index, then re-runs the definitions of the two functions this revision replaced.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-01
"""

from pathlib import Path

from alembic import op

from ragstore.db.frozen import function_definition, section

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

_SQL = Path(__file__).resolve().parent / "sql"
# The functions this revision replaces, restored on downgrade from the frozen file that last defined each.
_REPLACED = (("0017_term_df.sql", "chunks_count_deleted"), ("0017_term_df.sql", "chunks_terms_updated"))


def upgrade() -> None:
    op.execute(section(_SQL / "0018_postings_one_index.sql", "upgrade"))


def downgrade() -> None:
    op.execute(section(_SQL / "0018_postings_one_index.sql", "downgrade"))
    for file, name in _REPLACED:
        op.execute(function_definition((_SQL / file).read_text(encoding="utf-8"), name))
