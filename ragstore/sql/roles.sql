-- Roles and identity: who may migrate, who owns a family table, the definer path of a bulk load, and the
-- owner's bindings of memory agents to database roles (ragstore.agent_principals). Parameters only; no names are
-- ever spliced into this text.

-- name: may_migrate
-- The owner side migrates: a superuser, a role with the privileges of ragstore_owner, a role with the
-- privileges of the schema's owner, or (before the first migration) a role that may create schemas.
SELECT current_user::text,
       coalesce((SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user), false)
    OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
               WHERE r.rolname = 'ragstore_owner' AND pg_catalog.pg_has_role(current_user, r.oid, 'USAGE'))
    OR coalesce((SELECT pg_catalog.pg_has_role(current_user, n.nspowner, 'USAGE')
                 FROM pg_catalog.pg_namespace n WHERE n.nspname = 'ragstore'),
                pg_catalog.has_database_privilege(current_database(), 'CREATE'))
    AS may_migrate

-- name: may_own_table
-- Whether this session has the privileges of the table's owner (so it may drop and build its indexes).
SELECT pg_catalog.pg_has_role(current_user, c.relowner, 'USAGE')
FROM pg_catalog.pg_class c
WHERE c.oid = to_regclass(format('ragstore.%%I', %(table)s::text))

-- name: owner_transfer
-- Whether a table just created should go to ragstore_owner, and whether this session may give it.
SELECT r.oid IS NOT NULL AND pg_catalog.pg_get_userbyid(c.relowner) <> 'ragstore_owner' AS wanted,
       r.oid IS NOT NULL AND pg_catalog.pg_has_role(current_user, r.oid, 'SET') AS may
FROM pg_catalog.pg_class c
LEFT JOIN pg_catalog.pg_roles r ON r.rolname = 'ragstore_owner'
WHERE c.oid = to_regclass(format('ragstore.%%I', %(table)s::text))

-- name: group_roles_exist
SELECT count(*) = 2 FROM pg_catalog.pg_roles WHERE rolname IN ('ragstore_app', 'ragstore_reader')

-- name: give_table_to_owner
ALTER TABLE ragstore.{table} OWNER TO ragstore_owner

-- name: grant_table_to_app
-- The app's and the reader's rights on a family table, whoever created it (default privileges cover only
-- tables made by ragstore_owner or the migrating role).
GRANT SELECT, INSERT, UPDATE, DELETE ON ragstore.{table} TO ragstore_app

-- name: grant_table_to_reader
GRANT SELECT ON ragstore.{table} TO ragstore_reader

-- name: give_view_to_owner
ALTER VIEW ragstore.{view} OWNER TO ragstore_owner

-- name: grant_view
-- A family's view (ragstore.vectors_<family>) is read by all three roles; each reads through it with its own
-- rights on the tables below (security_invoker).
GRANT SELECT ON ragstore.{view} TO ragstore_app, ragstore_reader

-- name: bulk_drop_hnsw
SELECT ragstore.family_bulk_drop_hnsw(%(family)s)

-- name: bulk_cluster
SELECT ragstore.family_bulk_cluster(%(family)s)

-- name: build_hnsw
SELECT ragstore.family_build_hnsw(%(family)s)
