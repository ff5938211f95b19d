-- ragstore migration 0008: identity. Read by migrations/versions/0008_identity.py; two sections.
--
-- Who may do what after this migration (the README's security section says the same):
--   ragstore_owner (and its members, and superusers)  the registry, family DDL, agent bindings, memory
--                  erasure through ragstore.memory_forget; sees every agent's memory and erasure log.
--   ragstore_app   indexes and searches; reads the registry; reads and appends the memory of the agents
--                  bound to it in ragstore.agent_principals, and sees their erasure-log entries.
--   ragstore_reader  SELECT: the registry, chunks, families' vectors; the memory of its bound agents.
-- An agent is bound to a role by a row (agent, role_name) that only the owner side writes; the policies
-- test pg_has_role(current_user, role, 'USAGE'), never a setting the caller can set.

-- section: upgrade

-- Which roles act for which memory agent. A session acts for agent A when its current_user has the
-- privileges of a role bound to A (that role itself, or a member of it). A binding to a role that does
-- not exist (dropped later) grants nothing; `ragstore memory revoke` removes it.
CREATE TABLE ragstore.agent_principals (
    agent       text NOT NULL CHECK (agent ~ '^[A-Za-z0-9_.-]{1,64}$'),
    role_name   text NOT NULL CHECK (role_name ~ '\S'),
    granted_by  text NOT NULL DEFAULT session_user,
    granted_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent, role_name)
);
COMMENT ON TABLE ragstore.agent_principals IS
    'ragstore memory: which database roles act for which agent; written by the owner side only';

-- True for the owner side: a member of ragstore_owner (with its privileges) or a superuser.
CREATE FUNCTION ragstore.acts_as_owner() RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog AS $fn$
    SELECT EXISTS (
        SELECT 1 FROM pg_catalog.pg_roles r
        WHERE (r.rolname = 'ragstore_owner' AND pg_catalog.pg_has_role(current_user, r.oid, 'USAGE'))
           OR (r.rolname = current_user AND r.rolsuper)
    )
$fn$;

-- The agents the current role acts for (SECURITY INVOKER: current_user is the caller's role).
CREATE FUNCTION ragstore.memory_agents() RETURNS text[]
LANGUAGE sql STABLE SET search_path = pg_catalog AS $fn$
    SELECT coalesce(array_agg(DISTINCT p.agent), '{}'::text[])
    FROM ragstore.agent_principals p
    JOIN pg_catalog.pg_roles r ON r.rolname = p.role_name
    WHERE pg_catalog.pg_has_role(current_user, r.oid, 'USAGE')
$fn$;

-- Row-level security by identity. Each function sits in a scalar subquery, so it runs once per
-- statement (an InitPlan), not once per row.
DROP POLICY memory_agent_isolation ON ragstore.memory;
CREATE POLICY memory_agent_isolation ON ragstore.memory
    USING ((SELECT ragstore.acts_as_owner()) OR agent = ANY ((SELECT ragstore.memory_agents())::text[]))
    WITH CHECK ((SELECT ragstore.acts_as_owner()) OR agent = ANY ((SELECT ragstore.memory_agents())::text[]));
DROP POLICY memory_embeddings_agent_isolation ON ragstore.memory_embeddings;
CREATE POLICY memory_embeddings_agent_isolation ON ragstore.memory_embeddings
    USING ((SELECT ragstore.acts_as_owner()) OR agent = ANY ((SELECT ragstore.memory_agents())::text[]))
    WITH CHECK ((SELECT ragstore.acts_as_owner()) OR agent = ANY ((SELECT ragstore.memory_agents())::text[]));

ALTER TABLE ragstore.memory_forget_log ENABLE ROW LEVEL SECURITY;
ALTER TABLE ragstore.memory_forget_log FORCE ROW LEVEL SECURITY;
CREATE POLICY memory_forget_log_read ON ragstore.memory_forget_log FOR SELECT
    USING ((SELECT ragstore.acts_as_owner()) OR agent = ANY ((SELECT ragstore.memory_agents())::text[]));
-- Only the owner side writes (and so reaches the append-only trigger with an UPDATE or DELETE).
CREATE POLICY memory_forget_log_owner ON ragstore.memory_forget_log
    USING ((SELECT ragstore.acts_as_owner()))
    WITH CHECK ((SELECT ragstore.acts_as_owner()));

-- The log's identity columns are the database's, whatever an INSERT says: the login role and the role
-- that ran the erasure (SECURITY INVOKER all the way from memory_forget, so current_user is that role).
CREATE FUNCTION ragstore.memory_forget_log_identity() RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog AS $fn$
BEGIN
    NEW.forgotten_by := session_user;
    NEW.acting_role := current_user;
    NEW.forgotten_at := now();
    RETURN NEW;
END
$fn$;
CREATE TRIGGER memory_forget_log_identity BEFORE INSERT ON ragstore.memory_forget_log
    FOR EACH ROW EXECUTE FUNCTION ragstore.memory_forget_log_identity();

-- Append-only, with one exception: a DELETE on ragstore.memory by the owner side inside
-- ragstore.memory_forget (the transaction-local ragstore.forget flag marks that path and guards against
-- accidents; it is no permission: the role must act as the owner, and app and reader hold no DELETE).
-- SECURITY INVOKER, so current_user is the role that deletes and the log records it.
CREATE OR REPLACE FUNCTION ragstore.memory_append_only() RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog AS $fn$
DECLARE
    reason text;
BEGIN
    IF TG_LEVEL = 'ROW' AND TG_OP = 'DELETE' AND TG_TABLE_NAME = 'memory'
       AND coalesce(current_setting('ragstore.forget', true), '') = 'on'
       AND ragstore.acts_as_owner() THEN
        reason := coalesce(current_setting('ragstore.forget_reason', true), '');
        IF reason !~ '\S' THEN
            RAISE EXCEPTION 'ragstore.memory: an erasure needs a reason'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        INSERT INTO ragstore.memory_forget_log (agent, store, record_id, reason, acting_role)
        VALUES (OLD.agent, OLD.store, OLD.id, reason, current_user);
        RETURN OLD;
    END IF;
    RAISE EXCEPTION USING
        MESSAGE = 'ragstore.' || TG_TABLE_NAME || ': append-only, ' || TG_OP || ' refused',
        ERRCODE = 'insufficient_privilege',
        HINT = 'the owner erases a memory record with ragstore.memory_forget(agent, id, reason)';
END
$fn$;

-- The legal-erasure path: the owner side only (EXECUTE is granted to ragstore_owner alone, and the
-- function checks again), logged by the trigger above.
CREATE OR REPLACE FUNCTION ragstore.memory_forget(p_agent text, p_id text, p_reason text)
RETURNS SETOF ragstore.memory_forget_log
LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog AS $fn$
DECLARE
    deleted integer;
BEGIN
    IF NOT ragstore.acts_as_owner() THEN
        RAISE EXCEPTION USING
            MESSAGE = 'ragstore.memory_forget: only ragstore_owner (or a superuser) erases memory records',
            ERRCODE = 'insufficient_privilege';
    END IF;
    IF p_reason IS NULL OR p_reason !~ '\S' THEN
        RAISE EXCEPTION 'ragstore.memory_forget: a reason is required' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM set_config('ragstore.forget', 'on', true);
    PERFORM set_config('ragstore.forget_reason', p_reason, true);
    DELETE FROM ragstore.memory WHERE agent = p_agent AND id = p_id;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    PERFORM set_config('ragstore.forget', '', true);
    PERFORM set_config('ragstore.forget_reason', '', true);
    IF deleted > 0 THEN
        RETURN QUERY SELECT * FROM ragstore.memory_forget_log l
            WHERE l.agent = p_agent AND l.record_id = p_id ORDER BY l.log_id DESC LIMIT 1;
    END IF;
END
$fn$;
REVOKE ALL ON FUNCTION ragstore.memory_forget(text, text, text) FROM PUBLIC;

-- A bulk load's index work, for the app role too: SECURITY DEFINER, owned by ragstore_owner (below).
-- Each takes a family NAME and finds its table in the registry, which only the owner changes; each
-- does only what a bulk load into an empty family does, and returns whether it did anything.
-- Drop the HNSW index of a family whose table is empty (under the table's lock).
CREATE FUNCTION ragstore.family_bulk_drop_hnsw(p_family text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $fn$
DECLARE
    t      text;
    filled boolean;
BEGIN
    SELECT f.table_name INTO t FROM ragstore.families f WHERE f.name = p_family;
    IF t IS NULL THEN
        RAISE EXCEPTION USING MESSAGE = 'no family named ' || quote_literal(coalesce(p_family, '')),
            ERRCODE = 'undefined_object';
    END IF;
    IF to_regclass(format('ragstore.%I', t || '_embedding_hnsw')) IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('LOCK TABLE ragstore.%I IN ACCESS EXCLUSIVE MODE', t);
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM ragstore.%I)', t) INTO filled;
    IF filled THEN
        RETURN false;
    END IF;
    EXECUTE format('DROP INDEX ragstore.%I', t || '_embedding_hnsw');
    RETURN true;
END
$fn$;

-- Rewrite a family table in package order and analyze it, while its HNSW index is missing (a bulk load).
CREATE FUNCTION ragstore.family_bulk_cluster(p_family text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog SET maintenance_work_mem = '1GB' AS $fn$
DECLARE
    t text;
BEGIN
    SELECT f.table_name INTO t FROM ragstore.families f WHERE f.name = p_family;
    IF t IS NULL THEN
        RAISE EXCEPTION USING MESSAGE = 'no family named ' || quote_literal(coalesce(p_family, '')),
            ERRCODE = 'undefined_object';
    END IF;
    IF to_regclass(format('ragstore.%I', t || '_embedding_hnsw')) IS NOT NULL
       OR to_regclass(format('ragstore.%I', t || '_package_path')) IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('CLUSTER ragstore.%I USING %I', t, t || '_package_path');
    EXECUTE format('ANALYZE ragstore.%I', t);
    RETURN true;
END
$fn$;

-- Build a family's missing HNSW index, exactly as `ragstore family create` makes it.
CREATE FUNCTION ragstore.family_build_hnsw(p_family text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog SET maintenance_work_mem = '1GB' AS $fn$
DECLARE
    t   text;
    vt  text;
    ext text;
BEGIN
    SELECT f.table_name, f.vector_type INTO t, vt FROM ragstore.families f WHERE f.name = p_family;
    -- the operator class lives in pgvector's schema, which is not on this function's search_path
    SELECT n.nspname INTO ext FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'vector';
    IF t IS NULL THEN
        RAISE EXCEPTION USING MESSAGE = 'no family named ' || quote_literal(coalesce(p_family, '')),
            ERRCODE = 'undefined_object';
    END IF;
    IF to_regclass(format('ragstore.%I', t || '_embedding_hnsw')) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE INDEX %I ON ragstore.%I USING hnsw (embedding %I.%I) '
                   'WITH (m = 16, ef_construction = 128)',
                   t || '_embedding_hnsw', t, ext, vt || '_cosine_ops');
    RETURN true;
END
$fn$;
REVOKE ALL ON FUNCTION ragstore.family_bulk_drop_hnsw(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ragstore.family_bulk_cluster(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ragstore.family_build_hnsw(text) FROM PUBLIC;

-- Ownership and grants (skipped with a NOTICE when the three roles are missing; see sql/roles.sql).
DO $grants$
DECLARE
    me   text := current_user;
    obj  record;
BEGIN
    IF (SELECT count(*) FROM pg_roles
        WHERE rolname IN ('ragstore_owner', 'ragstore_app', 'ragstore_reader')) < 3 THEN
        RAISE NOTICE 'ragstore: the ragstore roles are missing; ask a DBA to run sql/roles.sql, then migrate again';
        RETURN;
    END IF;

    -- Everything in the schema belongs to ragstore_owner, family tables a superuser made included
    -- (as their owner, ragstore_owner maintains them: the SECURITY DEFINER functions above rely on it).
    FOR obj IN
        SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'ragstore' AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
          AND pg_get_userbyid(c.relowner) <> 'ragstore_owner'
          AND pg_has_role(me, c.relowner, 'USAGE')
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
        WHERE n.nspname = 'ragstore' AND pg_get_userbyid(p.proowner) <> 'ragstore_owner'
          AND pg_has_role(me, p.proowner, 'USAGE')
    LOOP
        EXECUTE format('ALTER %s %s OWNER TO ragstore_owner',
                       CASE obj.prokind WHEN 'p' THEN 'PROCEDURE' WHEN 'a' THEN 'AGGREGATE' ELSE 'FUNCTION' END,
                       obj.sig);
    END LOOP;

    -- The registry is the owner's: app and reader read it.
    REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON ragstore.families FROM ragstore_app, ragstore_reader;
    GRANT SELECT ON ragstore.families TO ragstore_app, ragstore_reader;
    -- Memory: append (app) and read, never change or delete; the log is written by the erasure path only.
    REVOKE UPDATE, DELETE, TRUNCATE ON ragstore.memory, ragstore.memory_embeddings
        FROM ragstore_app, ragstore_reader;
    REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON ragstore.memory_forget_log FROM ragstore_app, ragstore_reader;
    GRANT SELECT ON ragstore.memory_forget_log TO ragstore_app, ragstore_reader;
    REVOKE ALL ON ragstore.agent_principals FROM ragstore_app, ragstore_reader;
    GRANT SELECT ON ragstore.agent_principals TO ragstore_app, ragstore_reader;
    -- Functions: erasure for the owner; a bulk load's index work for the app; the policy helpers for all.
    REVOKE ALL ON FUNCTION ragstore.memory_forget(text, text, text) FROM ragstore_app, ragstore_reader;
    GRANT EXECUTE ON FUNCTION ragstore.memory_forget(text, text, text) TO ragstore_owner;
    REVOKE ALL ON FUNCTION ragstore.family_bulk_drop_hnsw(text), ragstore.family_bulk_cluster(text),
        ragstore.family_build_hnsw(text) FROM ragstore_reader;
    GRANT EXECUTE ON FUNCTION ragstore.family_bulk_drop_hnsw(text), ragstore.family_bulk_cluster(text),
        ragstore.family_build_hnsw(text) TO ragstore_app, ragstore_owner;
    GRANT EXECUTE ON FUNCTION ragstore.acts_as_owner(), ragstore.memory_agents()
        TO ragstore_app, ragstore_reader;
END
$grants$;

-- section: downgrade

DROP FUNCTION ragstore.family_build_hnsw(text);
DROP FUNCTION ragstore.family_bulk_cluster(text);
DROP FUNCTION ragstore.family_bulk_drop_hnsw(text);

DROP TRIGGER memory_forget_log_identity ON ragstore.memory_forget_log;
DROP FUNCTION ragstore.memory_forget_log_identity();
DROP POLICY memory_forget_log_owner ON ragstore.memory_forget_log;
DROP POLICY memory_forget_log_read ON ragstore.memory_forget_log;
ALTER TABLE ragstore.memory_forget_log NO FORCE ROW LEVEL SECURITY;
ALTER TABLE ragstore.memory_forget_log DISABLE ROW LEVEL SECURITY;

DROP POLICY memory_agent_isolation ON ragstore.memory;
CREATE POLICY memory_agent_isolation ON ragstore.memory
    USING (agent = current_setting('ragstore.agent', true))
    WITH CHECK (agent = current_setting('ragstore.agent', true));
DROP POLICY memory_embeddings_agent_isolation ON ragstore.memory_embeddings;
CREATE POLICY memory_embeddings_agent_isolation ON ragstore.memory_embeddings
    USING (agent = current_setting('ragstore.agent', true))
    WITH CHECK (agent = current_setting('ragstore.agent', true));

-- The functions of revision 0003, as they were.
CREATE OR REPLACE FUNCTION ragstore.memory_append_only() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $fn$
DECLARE
    reason text;
BEGIN
    IF TG_LEVEL = 'ROW' AND TG_OP = 'DELETE' AND TG_TABLE_NAME = 'memory'
       AND coalesce(current_setting('ragstore.forget', true), '') = 'on' THEN
        reason := coalesce(current_setting('ragstore.forget_reason', true), '');
        IF reason !~ '\S' THEN
            RAISE EXCEPTION 'ragstore.memory: an erasure needs a reason'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        INSERT INTO ragstore.memory_forget_log (agent, store, record_id, reason, acting_role)
        VALUES (OLD.agent, OLD.store, OLD.id, reason,
                coalesce(nullif(current_setting('ragstore.forget_role', true), ''), session_user));
        RETURN OLD;
    END IF;
    RAISE EXCEPTION USING
        MESSAGE = 'ragstore.' || TG_TABLE_NAME || ': append-only, ' || TG_OP || ' refused',
        ERRCODE = 'insufficient_privilege',
        HINT = 'erase a memory record with ragstore.memory_forget(agent, id, reason)';
END
$fn$;

CREATE OR REPLACE FUNCTION ragstore.memory_forget(p_agent text, p_id text, p_reason text)
RETURNS SETOF ragstore.memory_forget_log
LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog AS $fn$
DECLARE
    previous_agent text := current_setting('ragstore.agent', true);
    deleted integer;
BEGIN
    IF p_reason IS NULL OR p_reason !~ '\S' THEN
        RAISE EXCEPTION 'ragstore.memory_forget: a reason is required' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM set_config('ragstore.agent', p_agent, true);
    PERFORM set_config('ragstore.forget', 'on', true);
    PERFORM set_config('ragstore.forget_reason', p_reason, true);
    PERFORM set_config('ragstore.forget_role', current_user, true);
    DELETE FROM ragstore.memory WHERE agent = p_agent AND id = p_id;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    PERFORM set_config('ragstore.forget', '', true);
    PERFORM set_config('ragstore.forget_reason', '', true);
    PERFORM set_config('ragstore.forget_role', '', true);
    PERFORM set_config('ragstore.agent', coalesce(previous_agent, ''), true);
    IF deleted > 0 THEN
        RETURN QUERY SELECT * FROM ragstore.memory_forget_log l
            WHERE l.agent = p_agent AND l.record_id = p_id ORDER BY l.log_id DESC LIMIT 1;
    END IF;
END
$fn$;

DROP FUNCTION ragstore.memory_agents();
DROP FUNCTION ragstore.acts_as_owner();
DROP TABLE ragstore.agent_principals;

-- The grants of revision 0004 on these objects, back as they were.
DO $grants$
BEGIN
    IF (SELECT count(*) FROM pg_roles
        WHERE rolname IN ('ragstore_owner', 'ragstore_app', 'ragstore_reader')) < 3 THEN
        RETURN;
    END IF;
    GRANT SELECT, INSERT, UPDATE, DELETE ON ragstore.families, ragstore.memory, ragstore.memory_embeddings,
        ragstore.memory_forget_log TO ragstore_app;
    GRANT EXECUTE ON FUNCTION ragstore.memory_forget(text, text, text) TO ragstore_app, ragstore_reader;
END
$grants$;
