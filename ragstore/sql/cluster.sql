-- The local Citus cluster of `ragstore cluster start` (ragstore.db.cluster): registering the nodes and
-- letting the ragstore group roles act on the workers. Nodes are named by their socket folder: they reach
-- each other through Unix sockets, never TCP.

-- name: set_coordinator
SELECT citus_set_coordinator_host(%(host)s, %(port)s)

-- name: workers
SELECT nodeid, nodename, nodeport FROM pg_catalog.pg_dist_node WHERE groupid <> 0

-- name: add_worker
SELECT citus_add_node(%(host)s, %(port)s)

-- name: group_roles
-- The three group roles, NOLOGIN, as ragstore migrate makes them (it leaves existing ones alone); made here
-- already so that the workers' copies can be given LOGIN below before anything runs.
DO $$
DECLARE r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['ragstore_owner', 'ragstore_app', 'ragstore_reader'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = r) THEN
            EXECUTE format('CREATE ROLE %I NOLOGIN', r);
        END IF;
    END LOOP;
END
$$

-- name: worker_role_logins
-- On a worker only (not propagated): Citus opens its connections to the workers as the coordinator's
-- current role, which is a group role after SET ROLE and inside the SECURITY DEFINER bulk-load functions
-- (owned by ragstore_owner). LOGIN on the workers lets those connections in; on the coordinator, where
-- clients connect, the group roles stay NOLOGIN.
SET citus.enable_alter_role_propagation = off;
ALTER ROLE ragstore_owner LOGIN;
ALTER ROLE ragstore_app LOGIN;
ALTER ROLE ragstore_reader LOGIN
