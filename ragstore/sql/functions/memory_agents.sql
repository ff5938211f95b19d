-- ragstore.memory_agents, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- The agents the current role acts for (SECURITY INVOKER: current_user is the caller's role).
-- Called by: everyone (the policies run it as the caller).

CREATE OR REPLACE FUNCTION ragstore.memory_agents() RETURNS text[]
LANGUAGE sql STABLE SET search_path = pg_catalog AS $fn$
    SELECT coalesce(array_agg(DISTINCT p.agent), '{}'::text[])
    FROM ragstore.agent_principals p
    JOIN pg_catalog.pg_roles r ON r.rolname = p.role_name
    WHERE pg_catalog.pg_has_role(current_user, r.oid, 'USAGE')
$fn$;
