"""family metadata: each family table keeps its chunks' metadata beside the vectors, GIN-indexed

A metadata filter then reads the family table alone (as a package filter does) instead of looking up
each matching chunk in ``ragstore.chunks``. The SQL lives next to this file, in
sql/0009_family_metadata.sql (upgrade) and sql/0009_family_metadata_down.sql (downgrade).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from pathlib import Path

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_SQL = Path(__file__).resolve().parent / "sql"


def _read(name: str) -> str:
    return (_SQL / name).read_text(encoding="utf-8").strip().rstrip(";")


def upgrade() -> None:
    op.execute(_read("0009_family_metadata.sql"))


def downgrade() -> None:
    op.execute(_read("0009_family_metadata_down.sql"))
