-- ragstore roles, for DBAs who manage roles by hand.
--
-- `ragstore migrate` creates the three group roles itself when the migrating role is a superuser or has
-- CREATEROLE. When it has neither, run this file as a role that may create roles, then `ragstore migrate`
-- again: it applies the ownership and grants then (section "grants" of ragstore/sql/schema.sql, the one
-- text of who may do what; docs/guide/roles.md explains it). Every statement here is idempotent.
--
--   ragstore_owner   NOLOGIN  owns schema ragstore and every object in it: `ragstore migrate`, `family
--                             create/drop/migrate`, the registry ragstore.families, agent bindings
--                             (ragstore.agent_principals), memory erasure (ragstore.memory_forget)
--   ragstore_app     NOLOGIN  indexes and searches: DML on chunks, family tables and the embedding cache,
--                             EXECUTE, TEMP tables; SELECT on the registry; appends and reads the memory of
--                             the agents bound to it; no CREATE or ALTER in schema ragstore
--   ragstore_reader  NOLOGIN  SELECT and EXECUTE only; reads the memory of the agents bound to it
--
-- The roles are cluster-wide. They are never dropped by a downgrade; to remove them from a cluster where
-- no database uses them any more:  REASSIGN OWNED BY ragstore_owner TO postgres; DROP OWNED BY ragstore_app;
-- (in each database), then DROP ROLE ragstore_reader, ragstore_app, ragstore_owner;

-- 1. The roles (cluster-wide; needs CREATEROLE).
DO $$
DECLARE r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['ragstore_owner', 'ragstore_app', 'ragstore_reader'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
            EXECUTE format('CREATE ROLE %I NOLOGIN', r);
        END IF;
    END LOOP;
END
$$;

-- 2. People and services log in as their own role and inherit a group role:
--      CREATE ROLE alice LOGIN PASSWORD '...' IN ROLE ragstore_app;      -- or: GRANT ragstore_app TO alice;
--      (then, as the owner, bind the memory agents alice acts for: ragstore memory grant --agent ana --role alice)
--      CREATE ROLE grafana LOGIN PASSWORD '...' IN ROLE ragstore_reader;
--      GRANT ragstore_owner TO deployer;   -- runs `ragstore migrate` and `ragstore family create`
--    or, for a single service account, let the group role log in itself:
--      ALTER ROLE ragstore_app LOGIN PASSWORD '...';
--    Then: RAGSTORE_DSN='postgresql://alice:...@db.example/ragstore' ragstore index docs chunks.jsonl
--    A member that should act as the owner without holding its rights all the time can pick the role per
--    connection:  postgresql://deployer@db/ragstore?options=-c%20role%3Dragstore_owner

-- 3. Then, connected to the database, as the role that migrates:  ragstore migrate
--    Family tables are created at `ragstore family create` time, by the owner side only; default privileges
--    (declared by the migration for ragstore_owner and the migrating role) give the app and the reader
--    their rights on them. If family tables are created by yet another role, declare them for it too:
--      ALTER DEFAULT PRIVILEGES FOR ROLE <that role> IN SCHEMA ragstore
--          GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO ragstore_app;
--      ALTER DEFAULT PRIVILEGES FOR ROLE <that role> IN SCHEMA ragstore GRANT SELECT ON TABLES TO ragstore_reader;
