import psycopg
import pytest

from ragstore import migrate
from ragstore.errors import DatabaseUnavailable, SchemaError

SCHEMA_QUERY = """
SELECT c.relname, c.relkind, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE n.nspname = 'ragstore'
ORDER BY 1, 3
"""
FUNCTIONS_QUERY = """
SELECT p.proname, pg_get_function_identity_arguments(p.oid), md5(p.prosrc)
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'ragstore' ORDER BY 1, 2
"""


def snapshot(dsn: str) -> tuple[list, list]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(SCHEMA_QUERY).fetchall(), conn.execute(FUNCTIONS_QUERY).fetchall()


def test_upgrade_from_empty_reaches_head_and_second_run_changes_nothing(empty_dsn):
    first = migrate.upgrade(empty_dsn)
    assert first.before is None and first.after == migrate.head_revision() and first.changed
    before = snapshot(empty_dsn)
    second = migrate.upgrade(empty_dsn)
    assert not second.changed and second.applied == ()
    assert snapshot(empty_dsn) == before


def test_status_reports_current_and_head(empty_dsn):
    assert migrate.status(empty_dsn).current is None
    migrate.upgrade(empty_dsn)
    status = migrate.status(empty_dsn)
    assert status.up_to_date and status.current == status.head


def test_up_down_up_leaves_the_same_schema(empty_dsn):
    migrate.upgrade(empty_dsn)
    first = snapshot(empty_dsn)
    assert any(row[0] == "chunks" for row in first[0])
    migrate.downgrade(empty_dsn, "base")
    tables = {row[0] for row in snapshot(empty_dsn)[0]}
    assert "chunks" not in tables and "families" not in tables
    migrate.upgrade(empty_dsn)
    assert snapshot(empty_dsn) == first


def test_offline_sql_prints_ddl_without_a_database():
    ddl = migrate.offline_sql()
    assert "CREATE TABLE ragstore.chunks" in ddl
    assert "CREATE OR REPLACE FUNCTION ragstore.offline_embed" in ddl
    assert ddl.index("CREATE SCHEMA IF NOT EXISTS ragstore") < ddl.index(
        "CREATE TABLE IF NOT EXISTS ragstore.alembic_version"
    )
    assert "%%" not in ddl


@pytest.mark.slow
def test_concurrent_migrations_serialise_on_the_advisory_lock(empty_dsn):
    import subprocess
    import sys

    code = "import sys; from ragstore import migrate; print(migrate.upgrade(sys.argv[1]).changed)"
    procs = [
        subprocess.Popen([sys.executable, "-c", code, empty_dsn], stdout=subprocess.PIPE, text=True) for _ in range(3)
    ]
    outputs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sorted(outputs) == ["False", "False", "True"]
    assert migrate.status(empty_dsn).up_to_date


def test_refuses_a_database_that_is_not_utf8(pg_admin_dsn):
    from psycopg import sql

    from tests.fix_db import _drop_database, with_database

    name = "ragstore_latin1_test"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        admin.execute(
            sql.SQL("CREATE DATABASE {} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0").format(
                sql.Identifier(name)
            )
        )
    try:
        with pytest.raises(SchemaError, match="LATIN1"):
            migrate.upgrade(with_database(pg_admin_dsn, name))
    finally:
        _drop_database(pg_admin_dsn, name)


def test_unreachable_dsn_is_a_clear_error_with_the_password_masked():
    with pytest.raises(DatabaseUnavailable) as info:
        migrate.upgrade("postgresql://user:s3cret@127.0.0.1:1/nothing")
    assert "s3cret" not in str(info.value) and "***" in str(info.value)
