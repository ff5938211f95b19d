-- ragstore roles, for DBAs who manage roles by hand.
--
-- `ragstore migrate` (revision 0004) does all of this itself when the migrating role is a superuser or has
-- CREATEROLE. When it has neither, run the first block as a role that may create roles, then
-- `ragstore migrate` again (or run the whole file after migrating): every statement is idempotent.
--
--   ragstore_owner   NOLOGIN  owns schema ragstore and every object in it: `ragstore migrate`, `family
--                             create/drop/migrate`, the registry ragstore.families, agent bindings
--                             (ragstore.agent_principals), memory erasure (ragstore.memory_forget)
--   ragstore_app     NOLOGIN  indexes and searches: DML on chunks, family tables and the embedding cache,
--                             EXECUTE, TEMP tables; SELECT on the registry; appends and reads the memory of
--                             the agents bound to it; no CREATE or ALTER in schema ragstore
--   ragstore_reader  NOLOGIN  SELECT and EXECUTE only; reads the memory of the agents bound to it
--
-- Migration 0008 narrows what the grants below give (the registry, memory and its erasure log); run
-- `ragstore migrate` after this file, and it applies them.
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

-- 3. Grants in the current database (run connected to it, after `ragstore migrate`, as the schema owner
--    or a superuser). The migration does the same.
ALTER SCHEMA ragstore OWNER TO ragstore_owner;
REVOKE CREATE ON SCHEMA ragstore FROM PUBLIC;
GRANT USAGE ON SCHEMA ragstore TO ragstore_app, ragstore_reader;
DO $$
BEGIN
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO ragstore_app, ragstore_reader', current_database());
    EXECUTE format('GRANT TEMPORARY ON DATABASE %I TO ragstore_app', current_database());
END
$$;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ragstore TO ragstore_app;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA ragstore TO ragstore_app;
GRANT SELECT ON ALL TABLES IN SCHEMA ragstore TO ragstore_reader;
GRANT SELECT ON ALL SEQUENCES IN SCHEMA ragstore TO ragstore_reader;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA ragstore TO ragstore_app, ragstore_reader;
REVOKE INSERT, UPDATE, DELETE ON ragstore.alembic_version FROM ragstore_app;
-- What migration 0008 takes back (the registry is the owner's; memory is append-only and its erasure the
-- owner's; bindings are the owner's):
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON ragstore.families FROM ragstore_app, ragstore_reader;
REVOKE UPDATE, DELETE, TRUNCATE ON ragstore.memory, ragstore.memory_embeddings FROM ragstore_app, ragstore_reader;
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON ragstore.memory_forget_log FROM ragstore_app, ragstore_reader;
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON ragstore.agent_principals FROM ragstore_app, ragstore_reader;
REVOKE ALL ON FUNCTION ragstore.memory_forget(text, text, text) FROM PUBLIC, ragstore_app, ragstore_reader;
GRANT EXECUTE ON FUNCTION ragstore.memory_forget(text, text, text) TO ragstore_owner;
REVOKE ALL ON FUNCTION ragstore.family_bulk_drop_hnsw(text), ragstore.family_bulk_cluster(text),
    ragstore.family_build_hnsw(text) FROM PUBLIC, ragstore_reader;
GRANT EXECUTE ON FUNCTION ragstore.family_bulk_drop_hnsw(text), ragstore.family_bulk_cluster(text),
    ragstore.family_build_hnsw(text) TO ragstore_app;
-- What migration 0021 takes back: the full-text statistics are written by the chunk triggers alone, and
-- nobody calls the trigger functions (docs/guide/roles.md lists every function and who may call it).
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON ragstore.chunk_terms, ragstore.chunk_term_df,
    ragstore.family_chunk_deltas FROM ragstore_app, ragstore_reader;
REVOKE ALL ON FUNCTION ragstore.chunks_count_inserted(), ragstore.chunks_count_deleted(),
    ragstore.chunks_terms_updated(), ragstore.chunks_count_truncated(), ragstore.families_stats_reset()
    FROM PUBLIC, ragstore_app, ragstore_reader;

-- Family tables are created at `ragstore family create` time, by the owner side only (the app role has no
-- CREATE on the schema). Default privileges give the app and the reader their rights on them.
ALTER DEFAULT PRIVILEGES FOR ROLE ragstore_owner IN SCHEMA ragstore
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO ragstore_app;
ALTER DEFAULT PRIVILEGES FOR ROLE ragstore_owner IN SCHEMA ragstore
    GRANT SELECT ON TABLES TO ragstore_reader;
ALTER DEFAULT PRIVILEGES FOR ROLE ragstore_owner IN SCHEMA ragstore
    GRANT USAGE, SELECT ON SEQUENCES TO ragstore_app;
ALTER DEFAULT PRIVILEGES FOR ROLE ragstore_owner IN SCHEMA ragstore
    GRANT EXECUTE ON FUNCTIONS TO ragstore_app, ragstore_reader;
-- If family tables are created by another role (e.g. the deployer connects without role=ragstore_owner),
-- repeat the four statements above with FOR ROLE <that role>.
