"""agent memory

Revision ID: 0003
Revises:  append-only stores with row-level security:0002
Create Date: 2026-11-30
"""

from alembic import op

revision = "0003"
down_revision = " append-only stores with row-level security:0002"
branch_labels = None
depends_on = None

UPGRADE = r"""
SELECT 1
"""

DOWNGRADE = r"""
SELECT 1
"""


def upgrade() -> None:
    op.execute(UPGRADE.strip().rstrip(";"))


def downgrade() -> None:
    op.execute(DOWNGRADE.strip().rstrip(";"))
