-- ragstore.acts_as_owner, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- True for the owner side: a member of ragstore_owner (with its privileges) or a superuser.
-- Read by the row-level security policies of the memory tables (schema.sql).
-- Called by: everyone (the policies run it as the caller).

CREATE OR REPLACE FUNCTION ragstore.acts_as_owner() RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog AS $fn$
    SELECT EXISTS (
        SELECT 1 FROM pg_catalog.pg_roles r
        WHERE (r.rolname = 'ragstore_owner' AND pg_catalog.pg_has_role(current_user, r.oid, 'USAGE'))
           OR (r.rolname = current_user AND r.rolsuper)
    )
$fn$;
