-- Revision 0001_baseline: the statements of the baseline itself, read by migrations/versions/0001_baseline.py.
-- The schema it builds is ragstore/sql/schema.sql and ragstore/sql/functions/; this file holds only what
-- is not head: the bridge from the revisions it replaced, and the downgrade to an empty schema.
--
-- The bridge. Until the squash ragstore had 19 revisions, 0001 to 0022. A database at 0020, 0021 or 0022
-- is brought to the baseline in place, its data kept (the sections bridge_* below, in the order
-- 0001_baseline.py says), then stamped 0001_baseline; the functions and grants are re-applied from their
-- files. These sections are frozen: they say what 0021 and 0022 did to the tables, not what head is.

-- section: bridge_applied_files
-- What every bridged database lacks: the record of the replaceable files (all re-applied just after).
CREATE TABLE ragstore.applied_files (
    name        text NOT NULL,
    sha256      bytea NOT NULL CHECK (length(sha256) = 32),
    applied_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT applied_files_pkey PRIMARY KEY (name)
);
COMMENT ON TABLE ragstore.applied_files IS
    'ragstore migrate: the SHA-256 of each replaceable file (ragstore/sql/functions/*.sql, grants) as last applied';

-- section: bridge_0021_before
-- From 0020, revision 0021's changes to the tables. No chunk write between here and the commit. The
-- statistics function 0021 folded into the chunk triggers goes (the new trigger functions come from their
-- files next).
LOCK TABLE ragstore.chunks IN SHARE ROW EXCLUSIVE MODE;
DROP FUNCTION IF EXISTS ragstore.chunk_term_df_add(text[], text[], bigint[]);

-- section: bridge_0021_after
-- The registry's statistics triggers (not on a Citus reference table), then the counts and the ledger
-- recomputed once from the postings, as 0021 did.
DO $triggers$
DECLARE
    on_citus boolean := false;
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition '
                'WHERE logicalrelid = ''ragstore.families''::regclass)' INTO on_citus;
    END IF;
    DROP TRIGGER IF EXISTS families_stats_drop ON ragstore.families;
    DROP TRIGGER IF EXISTS families_stats_create ON ragstore.families;
    IF NOT on_citus THEN
        CREATE TRIGGER families_stats_drop AFTER DELETE ON ragstore.families
            REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION ragstore.families_stats_reset();
        CREATE TRIGGER families_stats_create AFTER INSERT ON ragstore.families
            REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ragstore.families_stats_reset();
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_trigger
               WHERE tgrelid = 'ragstore.chunks'::regclass AND tgname = 'chunks_count_insert') THEN
        DELETE FROM ragstore.chunk_terms AS t
        WHERE NOT EXISTS (SELECT 1 FROM ragstore.families AS f WHERE f.name = t.family);
        DELETE FROM ragstore.chunk_term_df;
        INSERT INTO ragstore.chunk_term_df (family, lexeme, df)
        SELECT t.family, t.lexeme, count(*) FROM ragstore.chunk_terms AS t WHERE t.lexeme <> ''
        GROUP BY t.family, t.lexeme ORDER BY t.family, t.lexeme;
        DELETE FROM ragstore.family_chunk_deltas;
        INSERT INTO ragstore.family_chunk_deltas (family, delta, tokens)
        SELECT t.family, count(*), coalesce(sum(t.tf), 0) FROM ragstore.chunk_terms AS t WHERE t.lexeme = ''
        GROUP BY t.family;
    END IF;
END
$triggers$;

-- section: bridge_0022
-- From 0020 or 0021, revision 0022: the source registry of folder documents (its grants come with the
-- grants re-applied after).
CREATE TABLE IF NOT EXISTS ragstore.family_sources (
    family         text NOT NULL REFERENCES ragstore.families (name) ON DELETE CASCADE,
    prefix         text NOT NULL CHECK (prefix <> '' AND strpos(prefix, '/') = 0),
    root           text NOT NULL,
    host           text NOT NULL,
    first_written  timestamptz NOT NULL DEFAULT now(),
    last_written   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (family, prefix)
);
COMMENT ON TABLE ragstore.family_sources IS
    'which folder (root path and host) last wrote the documents under each package prefix of a family';

-- section: bridge_stamp
UPDATE ragstore.alembic_version SET version_num = '0001_baseline';

-- section: downgrade
-- Every ragstore table (family tables included, and their data) and function goes; the version table
-- stays (Alembic empties it). The roles are cluster-wide and other databases may use them: this database's
-- grants are revoked, the schema given back to the migrating role, the roles left in place.
DO $down$
DECLARE
    obj  record;
    r    text;
    me   text := current_user;
BEGIN
    FOR obj IN SELECT table_name FROM ragstore.families LOOP
        EXECUTE format('DROP TABLE IF EXISTS ragstore.%I', obj.table_name);
    END LOOP;
    FOR obj IN
        SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'ragstore' AND c.relkind IN ('r', 'p') AND c.relname <> 'alembic_version'
    LOOP
        EXECUTE format('DROP TABLE IF EXISTS ragstore.%I CASCADE', obj.relname);
    END LOOP;
    FOR obj IN
        SELECT p.oid::regprocedure AS sig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'ragstore'
    LOOP
        EXECUTE format('DROP FUNCTION %s', obj.sig);
    END LOOP;
    IF (SELECT count(*) FROM pg_roles
        WHERE rolname IN ('ragstore_owner', 'ragstore_app', 'ragstore_reader')) < 3 THEN
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
    REVOKE ALL ON ragstore.alembic_version FROM ragstore_app, ragstore_reader;
    REVOKE ALL ON SCHEMA ragstore FROM ragstore_app, ragstore_reader;
    EXECUTE format('REVOKE CONNECT, TEMPORARY ON DATABASE %I FROM ragstore_app, ragstore_reader',
                   current_database());
    IF pg_get_userbyid((SELECT relowner FROM pg_class WHERE oid = 'ragstore.alembic_version'::regclass))
       = 'ragstore_owner' THEN
        EXECUTE format('ALTER TABLE ragstore.alembic_version OWNER TO %I', me);
    END IF;
    IF EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'ragstore'
               AND pg_get_userbyid(nspowner) = 'ragstore_owner') THEN
        EXECUTE format('ALTER SCHEMA ragstore OWNER TO %I', me);
    END IF;
END
$down$
