"""source hash: byte-level change detection for ``ragstore index``

``ragstore.chunks.source_sha256`` holds the hash of the input bytes a chunk was last written from (one
JSONL line, or one Parquet/NumPy row's columns), keyed by family, model and full-text configuration. A
rerun hashes each input record's bytes and looks the hashes up through the index on this column: a record
whose hash is stored is unchanged and is never parsed. NULL (rows written before, or from documents)
means "compare the parsed record", as before.

The statements are in ``sql/0011_source_hash.sql`` next to this file.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from pathlib import Path

from alembic import op

from ragstore.db.frozen import section

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_SQL = Path(__file__).resolve().parent / "sql" / "0011_source_hash.sql"


def upgrade() -> None:
    op.execute(section(_SQL, "upgrade"))


def downgrade() -> None:
    op.execute(section(_SQL, "downgrade"))
