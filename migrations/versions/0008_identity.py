"""identity: agents bound to database roles, owner-only audited erasure, the registry as the owner's

The statements are in ``sql/0008_identity.sql`` next to this file (shipped with the migrations), so a
DBA reads them as plain SQL. What they do:

- ``ragstore.agent_principals(agent, role_name)``: which database roles act for which memory agent,
  written only by the owner side. Row-level security on ``memory``, ``memory_embeddings`` and
  ``memory_forget_log`` reads it through ``current_user`` (``pg_has_role(current_user, role, 'USAGE')``);
  the caller-set ``ragstore.agent`` setting no longer grants anything. The owner side (members of
  ``ragstore_owner``) sees every agent.
- ``ragstore.memory_forget``: EXECUTE for ``ragstore_owner`` only; the append-only trigger lets a DELETE
  through only for the owner side inside that function, and the erasure log takes ``current_user`` and
  ``session_user`` (a trigger overwrites whatever an INSERT says). App and reader lose DELETE on memory
  and every write on the log, and see only their own agents' log entries.
- ``ragstore.families``: SELECT only for app and reader (the owner changes the registry).
- ``ragstore.family_bulk_drop_hnsw`` / ``family_bulk_cluster`` / ``family_build_hnsw``: SECURITY DEFINER
  functions owned by ``ragstore_owner`` that do a bulk load's index work for a family named in the
  registry, so the app role can bulk-index without owning the table.
- Every table and function in the schema (family tables made by a superuser included) goes to
  ``ragstore_owner``.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from pathlib import Path

from alembic import op

from ragstore.db.frozen import section

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_SQL = Path(__file__).resolve().parent / "sql" / "0008_identity.sql"


def upgrade() -> None:
    op.execute(section(_SQL, "upgrade"))


def downgrade() -> None:
    op.execute(section(_SQL, "downgrade"))
