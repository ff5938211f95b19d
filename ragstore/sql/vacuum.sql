-- ragstore vacuum (ragstore/families/vacuum.py): who may, which tables, their sizes.

-- name: may_maintain
-- Vacuuming is the owner side's: a superuser, or a role with the privileges of ragstore_owner (which owns
-- the tables). PostgreSQL itself only warns and skips a table the role may not vacuum; ragstore refuses.
SELECT current_user::text,
       coalesce((SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user), false)
    OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
               WHERE r.rolname = 'ragstore_owner' AND pg_catalog.pg_has_role(current_user, r.oid, 'USAGE'))
    AS may_maintain

-- name: all_tables
-- Every table of schema ragstore (family tables included) but Alembic's version table.
SELECT c.relname::text
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = 'ragstore' AND c.relkind IN ('r', 'p') AND c.relname <> 'alembic_version'
ORDER BY 1

-- name: sizes
-- Bytes on disk of each table named (heap, indexes, TOAST), then of the whole database; a table that does
-- not exist counts 0.
SELECT t.name, coalesce(pg_total_relation_size(to_regclass(format('ragstore.%%I', t.name))), 0)
FROM unnest(%(tables)s::text[]) AS t(name)
UNION ALL
SELECT NULL, pg_database_size(current_database())

-- name: vacuum
VACUUM (ANALYZE) ragstore.{table}

-- name: vacuum_full
VACUUM (FULL, ANALYZE) ragstore.{table}
