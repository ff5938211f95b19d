"""postings without a foreign key: ragstore.chunk_terms is kept by the chunk triggers alone

A foreign key is checked row by row, once per posting (one per distinct word of a chunk); the delete and
truncate triggers on ragstore.chunks now remove the postings set-based. The SQL lives next to this file,
in sql/0016_postings_without_fk.sql; the downgrade then re-runs 0012's and 0010's definitions of the two
trigger functions it replaced.

Revision ID: 0016
Revises: 0013
Create Date: 2026-12-01
"""

from pathlib import Path

from alembic import op

from ragstore.db.frozen import function_definition, section

revision = "0016"
down_revision = "0013"
branch_labels = None
depends_on = None

_SQL = Path(__file__).resolve().parent / "sql"
# The functions this revision replaces, restored on downgrade from the frozen file that last defined each.
_REPLACED = (("0012_bm25.sql", "chunks_count_deleted"), ("0010_fusion.sql", "chunks_count_truncated"))


def upgrade() -> None:
    op.execute(section(_SQL / "0016_postings_without_fk.sql", "upgrade"))


def downgrade() -> None:
    op.execute(section(_SQL / "0016_postings_without_fk.sql", "downgrade"))
    for file, name in _REPLACED:
        op.execute(function_definition((_SQL / file).read_text(encoding="utf-8"), name))
