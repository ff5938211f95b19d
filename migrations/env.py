"""Alembic environment for ragstore: one advisory lock, version table in schema ragstore, and the schema at
head kept in ``ragstore/sql/`` (``ragstore/db/schema.py``).

ragstore calls Alembic through ``ragstore.migrate``, which passes either a live psycopg connection
factory (``config.attributes["connection_factory"]``) or, for ``--sql``, nothing at all (offline mode).

In one transaction, under the lock:

1. an empty database is built from ``ragstore/sql/schema.sql`` and the function files and stamped at the
   newest revision (the revisions are for databases made before them); a database at a revision of the
   chains the baseline replaced is upgraded to the baseline in place (``versions/0006_baseline.py``);
2. the revisions it lacks run;
3. every replaceable file whose text differs from the one the database recorded is re-applied (a function
   file, section ``grants`` of ``schema.sql``); their names go to ``config.attributes["replaced"]``.
"""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy import Connection, create_engine, pool, text

from ragstore.db import schema

# Any 64-bit number will do; it only has to be the same for every `ragstore migrate`.
MIGRATE_LOCK = 0x7261677374_6F7265  # "ragstore"
BASELINE = "0006_baseline"

config = context.config


def _baseline() -> Any:
    script = context.script.get_revision(BASELINE)
    assert script is not None
    return script.module


def _head() -> str:
    head = context.script.get_current_head()
    assert head is not None
    return head


def _build() -> None:
    for statement in schema.build_statements(_head()):
        context.execute(statement)


def _prepare(connection: Connection) -> None:
    """Step 1: build an empty database, or upgrade one of the replaced chains; any other is left to Alembic."""
    has = connection.execute(
        text("SELECT to_regclass('ragstore.alembic_version') IS NOT NULL, to_regclass('ragstore.families') IS NOT NULL")
    ).one()
    version = None
    if has[0]:
        version = connection.execute(text("SELECT max(version_num) FROM ragstore.alembic_version")).scalar()
    if version is None:
        if has[1]:
            raise RuntimeError("schema ragstore has tables but no revision: it was not made by ragstore migrate")
        _build()
        return
    module = _baseline()
    if version in module.OLD_CHAIN and version not in module.BRIDGED:
        raise RuntimeError(
            f"this database is at ragstore revision {version}, older than {module.BRIDGED[0]}: migrate it with a "
            f"ragstore from before the squash first (see CHANGELOG.md), then with this one"
        )
    if version in module.BRIDGED or version in module.SQUASHED:
        module.upgrade_old(context.execute, version)


def _replace(connection: Connection) -> None:
    """Step 3: re-apply the replaceable files whose text changed (section grants only where it can act)."""
    applied = {str(name): bytes(sha) for name, sha in connection.execute(text(
        "SELECT name, sha256 FROM ragstore.applied_files"
    ))}  # fmt: skip
    may_grant = connection.execute(
        text(
            "SELECT (SELECT count(*) FROM pg_catalog.pg_roles WHERE rolname = ANY(:roles)) = 3 "
            "OR (SELECT rolsuper OR rolcreaterole FROM pg_catalog.pg_roles WHERE rolname = current_user)"
        ),
        {"roles": list(schema.ROLES)},
    ).scalar()
    items = [item for item in schema.pending(applied) if may_grant or item.name != schema.GRANTS]
    if items:
        for statement in schema.apply_statements(items):
            context.execute(statement)
    config.attributes["replaced"] = tuple(item.name for item in items)


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
        if context.get_starting_revision_argument() is None:
            _build()
            return
        context.run_migrations()
        # The database's record of its files is unknown here: every replaceable file, replacing.
        for statement in schema.apply_statements(schema.replaceables()):
            context.execute(statement)


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
                upgrading = _is_upgrade()
                if upgrading:
                    _prepare(connection)
                context.run_migrations()
                if upgrading:
                    _replace(connection)
            connection.commit()
        finally:
            # A failed migration leaves its transaction aborted: end it, or the unlock fails and hides the error.
            connection.rollback()
            connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATE_LOCK})
            connection.commit()


def _is_upgrade() -> bool:
    """Whether this run moves the database up (``ragstore.migrate.upgrade`` says so), not down."""
    return bool(config.attributes.get("upgrading", False))


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
