"""postings in one statement: a chunk insert's postings, words' counts and ledger rows are written by one
statement over the new rows' terms, materialized once

The SQL lives next to this file, in sql/0020_postings_one_statement.sql (section "upgrade"); the downgrade
re-runs the definition of the insert trigger function from 0017, the file that last defined it.

Revision ID: 0020
Revises: 0018
Create Date: 2026-12-01
"""

from pathlib import Path

from alembic import op

from ragstore.db.frozen import function_definition, section

revision = "0020"
down_revision = "0018"
branch_labels = None
depends_on = None

_SQL = Path(__file__).resolve().parent / "sql"
# The function this revision replaces, restored on downgrade from the frozen file that last defined it.
_REPLACED = (("0017_term_df.sql", "chunks_count_inserted"),)


def upgrade() -> None:
    op.execute(section(_SQL / "0020_postings_one_statement.sql", "upgrade"))


def downgrade() -> None:
    for file, name in _REPLACED:
        op.execute(function_definition((_SQL / file).read_text(encoding="utf-8"), name))
