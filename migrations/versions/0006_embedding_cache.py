"""embedding cache: one vector per (model key, sha256 of the text)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

UPGRADE = r"""
-- Embeddings by content: re-indexing a renamed file, or migrating a family back to a
-- model it used before, finds its vectors here instead of calling the backend again. The column is an
-- unconstrained vector so one table serves every dimension up to pgvector's storage limit (16,000);
-- halfvec families cache the full-precision float32 vector and cast it when they store it.
CREATE TABLE ragstore.embedding_cache (
    model           text NOT NULL,
    content_sha256  bytea NOT NULL CHECK (length(content_sha256) = 32),
    embedding       vector NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model, content_sha256)
);
COMMENT ON TABLE ragstore.embedding_cache IS
    'ragstore embedding cache: model key "backend:model:dim" + sha256 of the text -> its vector';
"""

DOWNGRADE = r"""
DROP TABLE ragstore.embedding_cache
"""


def upgrade() -> None:
    op.execute(UPGRADE.strip().rstrip(";"))


def downgrade() -> None:
    op.execute(DOWNGRADE.strip().rstrip(";"))
