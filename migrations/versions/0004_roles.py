"""roles and grants: owner, application, read-only reader

Three NOLOGIN group roles (cluster-wide, so created idempotently and never dropped here):

- ``ragstore_owner``  owns the schema ``ragstore`` and everything in it (tables, functions, views);
- ``ragstore_app``    indexes and searches: DML on the tables, EXECUTE, TEMP tables; no DDL in the schema;
- ``ragstore_reader`` SELECT and EXECUTE only.

Family tables are created later, by ``ragstore family create``. Creating one is DDL, so it is reserved to
the owner side (a superuser, the migrating role, or a member of ``ragstore_owner``); the app and reader
roles get their rights on those tables through default privileges declared here for both
``ragstore_owner`` and the role that runs this migration.

When the migrating role may not create roles and they do not exist yet, the role part is skipped with a
NOTICE (a DBA runs ``sql/roles.sql`` and migrates again); the schema itself is unaffected.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

UPGRADE = r"""
DO $roles$
DECLARE
    r        text;
    obj      record;
    me       text := current_user;
    may      boolean;
    missing  boolean := false;
BEGIN
    SELECT rolsuper OR rolcreaterole INTO may FROM pg_roles WHERE rolname = me;
    FOREACH r IN ARRAY ARRAY['ragstore_owner', 'ragstore_app', 'ragstore_reader'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
            IF may THEN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r);
            ELSE
                missing := true;
            END IF;
        END IF;
    END LOOP;
    IF missing THEN
        RAISE NOTICE 'ragstore: % may not create roles; ask a DBA to run sql/roles.sql, then migrate again', me;
        RETURN;
    END IF;

    -- The migrating role must be able to act as the owner (ALTER ... OWNER, later migrations, families).
    IF NOT pg_has_role(me, 'ragstore_owner', 'MEMBER') THEN
        EXECUTE format('GRANT ragstore_owner TO %I', me);
    END IF;

    -- Ownership of the schema and of every object in it.
    EXECUTE 'ALTER SCHEMA ragstore OWNER TO ragstore_owner';
    FOR obj IN
        SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'ragstore' AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
          -- serial and identity sequences follow their table
          AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                          AND d.deptype IN ('a', 'i') AND d.refclassid = 'pg_class'::regclass)
    LOOP
        EXECUTE format('ALTER %s ragstore.%I OWNER TO ragstore_owner',
                       CASE obj.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                                        WHEN 'S' THEN 'SEQUENCE' WHEN 'f' THEN 'FOREIGN TABLE'
                                        ELSE 'TABLE' END,
                       obj.relname);
    END LOOP;
    FOR obj IN
        SELECT p.oid::regprocedure AS sig, p.prokind FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'ragstore'
    LOOP
        EXECUTE format('ALTER %s %s OWNER TO ragstore_owner',
                       CASE obj.prokind WHEN 'p' THEN 'PROCEDURE' WHEN 'a' THEN 'AGGREGATE' ELSE 'FUNCTION' END,
                       obj.sig);
    END LOOP;

    -- Nobody but the owner creates objects in the schema.
    EXECUTE 'REVOKE CREATE ON SCHEMA ragstore FROM PUBLIC';
    EXECUTE 'GRANT USAGE ON SCHEMA ragstore TO ragstore_app, ragstore_reader';
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO ragstore_app, ragstore_reader', current_database());
    EXECUTE format('GRANT TEMPORARY ON DATABASE %I TO ragstore_app', current_database());

    EXECUTE 'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ragstore TO ragstore_app';
    EXECUTE 'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA ragstore TO ragstore_app';
    EXECUTE 'GRANT SELECT ON ALL TABLES IN SCHEMA ragstore TO ragstore_reader';
    EXECUTE 'GRANT SELECT ON ALL SEQUENCES IN SCHEMA ragstore TO ragstore_reader';
    EXECUTE 'GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA ragstore TO ragstore_app, ragstore_reader';
    -- The migration history is the owner's: the app may read it (migrate --status), never move it.
    IF to_regclass('ragstore.alembic_version') IS NOT NULL THEN
        EXECUTE 'REVOKE INSERT, UPDATE, DELETE ON ragstore.alembic_version FROM ragstore_app';
    END IF;

    -- Tables made later (family tables, later migrations), by the owner role or by the migrating role.
    FOREACH r IN ARRAY ARRAY['ragstore_owner', me] LOOP
        EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA ragstore '
                       'GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO ragstore_app', r);
        EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA ragstore '
                       'GRANT SELECT ON TABLES TO ragstore_reader', r);
        EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA ragstore '
                       'GRANT USAGE, SELECT ON SEQUENCES TO ragstore_app', r);
        EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA ragstore '
                       'GRANT EXECUTE ON FUNCTIONS TO ragstore_app, ragstore_reader', r);
    END LOOP;
END
$roles$
"""

# Roles are cluster-wide and other databases may use them: revoke what this database granted, give the
# objects back to the migrating role, and leave the roles in place (a DBA drops them; see sql/roles.sql).
DOWNGRADE = r"""
DO $roles$
DECLARE
    r    text;
    obj  record;
    me   text := current_user;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'ragstore_owner')
       OR NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'ragstore_app')
       OR NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'ragstore_reader') THEN
        RETURN;
    END IF;
    FOREACH r IN ARRAY ARRAY['ragstore_owner', me] LOOP
        EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA ragstore '
                       'REVOKE ALL ON TABLES FROM ragstore_app, ragstore_reader', r);
        EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA ragstore '
                       'REVOKE ALL ON SEQUENCES FROM ragstore_app, ragstore_reader', r);
        EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA ragstore '
                       'REVOKE ALL ON FUNCTIONS FROM ragstore_app, ragstore_reader', r);
    END LOOP;
    EXECUTE 'REVOKE ALL ON ALL TABLES IN SCHEMA ragstore FROM ragstore_app, ragstore_reader';
    EXECUTE 'REVOKE ALL ON ALL SEQUENCES IN SCHEMA ragstore FROM ragstore_app, ragstore_reader';
    EXECUTE 'REVOKE ALL ON ALL FUNCTIONS IN SCHEMA ragstore FROM ragstore_app, ragstore_reader';
    EXECUTE 'REVOKE ALL ON SCHEMA ragstore FROM ragstore_app, ragstore_reader';
    EXECUTE format('REVOKE CONNECT, TEMPORARY ON DATABASE %I FROM ragstore_app, ragstore_reader',
                   current_database());

    FOR obj IN
        SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'ragstore' AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
          AND pg_get_userbyid(c.relowner) = 'ragstore_owner'
          AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                          AND d.deptype IN ('a', 'i') AND d.refclassid = 'pg_class'::regclass)
    LOOP
        EXECUTE format('ALTER %s ragstore.%I OWNER TO %I',
                       CASE obj.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                                        WHEN 'S' THEN 'SEQUENCE' WHEN 'f' THEN 'FOREIGN TABLE'
                                        ELSE 'TABLE' END,
                       obj.relname, me);
    END LOOP;
    FOR obj IN
        SELECT p.oid::regprocedure AS sig, p.prokind FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'ragstore' AND pg_get_userbyid(p.proowner) = 'ragstore_owner'
    LOOP
        EXECUTE format('ALTER %s %s OWNER TO %I',
                       CASE obj.prokind WHEN 'p' THEN 'PROCEDURE' WHEN 'a' THEN 'AGGREGATE' ELSE 'FUNCTION' END,
                       obj.sig, me);
    END LOOP;
    IF EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'ragstore'
               AND pg_get_userbyid(nspowner) = 'ragstore_owner') THEN
        EXECUTE format('ALTER SCHEMA ragstore OWNER TO %I', me);
    END IF;
END
$roles$
"""


def upgrade() -> None:
    op.execute(UPGRADE.strip().rstrip(";"))


def downgrade() -> None:
    op.execute(DOWNGRADE.strip().rstrip(";"))
