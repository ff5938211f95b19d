"""family chunks: a family serves exactly its own chunks; cache keys name the provider's endpoint

The SQL lives next to this file, in sql/0007_family_chunks.sql (upgrade) and
sql/0007_family_chunks_down.sql (downgrade, then 0002's and 0005's frozen function files); all are
shipped in the wheel with the migrations.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from pathlib import Path

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_SQL = Path(__file__).resolve().parent / "sql"


def _read(name: str) -> str:
    return (_SQL / name).read_text(encoding="utf-8").strip().rstrip(";")


def upgrade() -> None:
    op.execute(_read("0007_family_chunks.sql"))


def downgrade() -> None:
    op.execute(_read("0007_family_chunks_down.sql"))
    # The search functions as 0002 and 0005 defined them: their own frozen files, not a copy.
    for older in ("0002_search.sql", "0005_hybrid.sql"):
        op.execute(_read(older).replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION"))
