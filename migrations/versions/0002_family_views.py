"""family views: every family's stable SQL name, the view ``ragstore.vectors_<family>``

A family created from this revision on gets the view with its table (``ragstore.families.create_view``),
and a model migration re-points it in its swap; this revision gives one to each family that exists already.
No table, index or policy changes, so ``schema.sql`` is unchanged. The DDL is the frozen file
``sql/0002_family_views.sql``.

Revision ID: 0002_family_views
Revises: 0001_baseline
Create Date: 2026-12-03
"""

from pathlib import Path

from alembic import op

revision = "0002_family_views"
down_revision = "0001_baseline"
branch_labels = None
depends_on = None

_SQL = Path(__file__).resolve().parent / "sql" / "0002_family_views.sql"


def _section(name: str) -> str:
    text = _SQL.read_text(encoding="utf-8")
    start = text.index(f"-- section: {name}\n")
    end = text.find("-- section: ", start + 1)
    return text[start : end if end >= 0 else len(text)].strip()


def upgrade() -> None:
    op.execute(_section("upgrade"))


def downgrade() -> None:
    op.execute(_section("downgrade"))
