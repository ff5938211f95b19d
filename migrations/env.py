"""Alembic environment for ragstore: stock shape, one advisory lock, version table in schema ragstore.

ragstore calls Alembic through ``ragstore.migrate``, which passes either a live psycopg connection
factory (``config.attributes["connection_factory"]``) or, for ``--sql``, nothing at all (offline mode).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool, text

# Any 64-bit number will do; it only has to be the same for every `ragstore migrate`.
MIGRATE_LOCK = 0x7261677374_6F7265  # "ragstore"

config = context.config


def run_migrations_offline() -> None:
    context.configure(
        url="postgresql+psycopg://",
        literal_binds=True,
        # "named" keeps a literal % as it is (pyformat would print %% into the DDL a DBA runs).
        dialect_opts={"paramstyle": "named"},
        version_table_schema="ragstore",
        transaction_per_migration=False,
    )
    with context.begin_transaction():
        # Online, the schema is made before Alembic creates its version table there; offline, say so first.
        context.execute("CREATE SCHEMA IF NOT EXISTS ragstore")
        context.run_migrations()


def run_migrations_online() -> None:
    factory = config.attributes["connection_factory"]
    engine = create_engine("postgresql+psycopg://", creator=factory, poolclass=pool.NullPool)
    with engine.connect() as connection:
        # The version table lives in schema ragstore, which must exist before Alembic looks for it.
        connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATE_LOCK})
        try:
            # Only when missing: CREATE SCHEMA checks the CREATE privilege on the database even with IF NOT
            # EXISTS, and a member of ragstore_owner migrating an existing schema need not hold it.
            if not connection.execute(text("SELECT to_regnamespace('ragstore') IS NOT NULL")).scalar():
                connection.execute(text("CREATE SCHEMA IF NOT EXISTS ragstore"))
            connection.commit()
            context.configure(connection=connection, version_table_schema="ragstore")
            with context.begin_transaction():
                context.run_migrations()
            connection.commit()
        finally:
            # A failed migration leaves its transaction aborted: end it, or the unlock fails and hides the error.
            connection.rollback()
            connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATE_LOCK})
            connection.commit()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
