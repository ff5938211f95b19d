"""api tokens: the bearer tokens of ``ragstore serve``, table ``ragstore.api_tokens``

Each token maps to a database role; only the SHA-256 of its secret is kept (``ragstore/serve/tokens.py``).
The owner side manages the table; ``ragstore_app`` and ``ragstore_reader`` get no right on it (section
``grants`` of ``schema.sql``, re-applied after this revision). The same table is in ``schema.sql``. The DDL
is the frozen file ``sql/0004_api_tokens.sql``.

Revision ID: 0004_api_tokens
Revises: 0002_family_views
Create Date: 2026-12-03
"""

from pathlib import Path

from alembic import op

revision = "0004_api_tokens"
down_revision = "0003_sync"
branch_labels = None
depends_on = None

_SQL = Path(__file__).resolve().parent / "sql" / "0004_api_tokens.sql"


def _section(name: str) -> str:
    text = _SQL.read_text(encoding="utf-8")
    start = text.index(f"-- section: {name}\n")
    end = text.find("-- section: ", start + 1)
    return text[start : end if end >= 0 else len(text)].strip()


def upgrade() -> None:
    op.execute(_section("upgrade"))


def downgrade() -> None:
    op.execute(_section("downgrade"))
