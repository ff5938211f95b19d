"""fusion: hybrid_search by the family's fusion settings, a per-family chunk count, ragstore.search_auto

The SQL lives next to this file, in sql/0010_fusion.sql (upgrade) and sql/0010_fusion_down.sql
(downgrade, which then re-runs 0007's definition of ragstore.hybrid_search).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

import re
from pathlib import Path

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_SQL = Path(__file__).resolve().parent / "sql"


def _read(name: str) -> str:
    return (_SQL / name).read_text(encoding="utf-8").strip().rstrip(";")


def upgrade() -> None:
    op.execute(_read("0010_fusion.sql"))


def downgrade() -> None:
    op.execute(_read("0010_fusion_down.sql"))
    older = _read("0007_family_chunks.sql")
    start = older.index("CREATE OR REPLACE " + "FUNCTION ragstore.hybrid_search(")  # split: no definition here
    end = re.search(r"COMMENT ON FUNCTION ragstore\.hybrid_search\([^)]*\) IS\s+'(?:[^']|'')*'", older[start:])
    assert end is not None
    op.execute(older[start : start + end.end()])
