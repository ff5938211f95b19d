-- Revision 0006_baseline: the statements of the baseline itself, read by migrations/versions/0006_baseline.py.
-- The schema it builds is ragstore/sql/schema.sql and ragstore/sql/functions/; this file holds only what
-- is not head: the upgrade of a database made by a revision it replaced, and the downgrade to an empty schema.
-- Every section but downgrade is frozen: it says what the old revisions did to the tables, not what head is.
--
-- Two chains came before. Until the first squash ragstore had 19 revisions, 0001 to 0022; a database at
-- 0020, 0021 or 0022 is brought to the old 0001_baseline in place, its data kept (the sections bridge_*,
-- in the order 0006_baseline.py says). Then came 0001_baseline, 0002_family_views, 0003_sync,
-- 0004_api_tokens and 0005_sync_status; a database at one of those (or bridged to 0001_baseline) gets the
-- sections after_<revision> from its revision on, what each later revision did. It is then stamped
-- 0006_baseline and, unless it was at 0005_sync_status (the same schema: only the stamp changes), every
-- function file and section grants are re-applied from head.

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

-- section: after_0001_baseline
-- Revision 0002_family_views: every family gets its stable SQL name, the view ragstore.vectors_<family>,
-- as `ragstore family create` made it then. Not on Citus, where families have no view.
DO $up$
DECLARE
    f record;
    v text;
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    FOR f IN SELECT name, table_name FROM ragstore.families ORDER BY name LOOP
        v := 'vectors_' || f.name;
        EXECUTE format(
            'CREATE OR REPLACE VIEW ragstore.%I WITH (security_invoker = true) AS '
            'SELECT e.chunk_id, e.package_path, c.text, c.metadata, e.embedding::vector AS embedding, e.model '
            'FROM ragstore.%I AS e JOIN ragstore.chunks AS c ON c.family = %L AND c.chunk_id = e.chunk_id',
            v, f.table_name, f.name);
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'ragstore_owner')
           AND pg_catalog.pg_has_role(current_user, 'ragstore_owner', 'SET') THEN
            EXECUTE format('ALTER VIEW ragstore.%I OWNER TO ragstore_owner', v);
        END IF;
        IF (SELECT count(*) FROM pg_catalog.pg_roles WHERE rolname IN ('ragstore_app', 'ragstore_reader')) = 2 THEN
            EXECUTE format('GRANT SELECT ON ragstore.%I TO ragstore_app, ragstore_reader', v);
        END IF;
    END LOOP;
END
$up$;

-- section: after_0002_family_views
-- Revision 0003_sync: the tables of `ragstore sync` and the view sync_status (as 0003 made it: section
-- after_0004_api_tokens replaces it). The function sync_enqueue and the grants are head files, applied after.
-- ---------------------------------------------------------------------------------------------------
-- Sync: families that follow tables of the same database (ragstore/sync/, docs/guide/sync.md)
-- ---------------------------------------------------------------------------------------------------

-- One row per followed table and family, written by the owner side (`ragstore sync add|alter|remove`). The
-- table is named (schema_name, table_name), which survives a dump and restore; table_oid is the one the
-- triggers were installed on. package and predicate are SQL expressions over the row, checked by
-- ragstore/sync/expressions.py when they are set; NULL means "<prefix>/<id>" and "every row". followed
-- lists every column whose change queues the row (the id, text, metadata columns and those package and
-- predicate read). The counters and the last error are the workers' (ragstore_app may update only them).
CREATE TABLE ragstore.sync_sources (
    id                bigint GENERATED ALWAYS AS IDENTITY,
    family            text NOT NULL,
    prefix            text NOT NULL CHECK (prefix <> '' AND strpos(prefix, '/') = 0),
    schema_name       text NOT NULL,
    table_name        text NOT NULL,
    table_oid         oid NOT NULL,
    id_column         text NOT NULL,
    text_columns      text[] NOT NULL CHECK (cardinality(text_columns) > 0),
    metadata_columns  text[] NOT NULL DEFAULT '{}',
    package           text,
    predicate         text,
    followed          text[] NOT NULL,
    synced_rows       bigint NOT NULL DEFAULT 0,
    synced_seconds    double precision NOT NULL DEFAULT 0,
    last_error        text,
    last_error_at     timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    altered_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT sync_sources_pkey PRIMARY KEY (id),
    CONSTRAINT sync_sources_family_prefix_key UNIQUE (family, prefix),
    CONSTRAINT sync_sources_family_table_key UNIQUE (family, schema_name, table_name),
    CONSTRAINT sync_sources_family_fkey FOREIGN KEY (family) REFERENCES ragstore.families (name) ON DELETE CASCADE
);
COMMENT ON TABLE ragstore.sync_sources IS
    'ragstore sync: the tables a family follows (id, text, metadata columns, package, predicate)';

-- The keys of rows whose followed columns changed and are not synced yet, one row per key: a change of a
-- key already queued only gives it a new seq (the number of its newest change). A worker claims keys by
-- setting not_before to the end of a lease (FOR UPDATE SKIP LOCKED, so two workers never claim one key)
-- and deletes a key only if its seq is still the one it claimed, so a change made while it worked is
-- synced again. A failing batch sets not_before (backoff) on its own keys only.
CREATE SEQUENCE ragstore.sync_queue_seq;
CREATE TABLE ragstore.sync_queue (
    source_id   bigint NOT NULL,
    key         text NOT NULL,
    seq         bigint NOT NULL,
    queued_at   timestamptz NOT NULL DEFAULT now(),
    changed_at  timestamptz NOT NULL DEFAULT now(),
    attempts    integer NOT NULL DEFAULT 0,
    not_before  timestamptz NOT NULL DEFAULT '-infinity',
    last_error  text,
    CONSTRAINT sync_queue_pkey PRIMARY KEY (source_id, key),
    CONSTRAINT sync_queue_source_fkey FOREIGN KEY (source_id)
        REFERENCES ragstore.sync_sources (id) ON DELETE CASCADE
);
CREATE INDEX sync_queue_source_seq_idx ON ragstore.sync_queue (source_id, seq);
COMMENT ON TABLE ragstore.sync_queue IS
    'ragstore sync: keys of followed rows changed and not synced yet (one row per key, seq of its last change)';

-- The keys a source has written chunks for, with at least as many chunks as they hold (<prefix>/<key>#0
-- ...#n-1): what a delete, a truncate, a row leaving the predicate or `sync remove --delete-chunks` removes.
CREATE TABLE ragstore.sync_rows (
    source_id  bigint NOT NULL,
    key        text NOT NULL,
    chunks     integer NOT NULL CHECK (chunks >= 0),
    CONSTRAINT sync_rows_pkey PRIMARY KEY (source_id, key),
    CONSTRAINT sync_rows_source_fkey FOREIGN KEY (source_id)
        REFERENCES ragstore.sync_sources (id) ON DELETE CASCADE
);
COMMENT ON TABLE ragstore.sync_rows IS
    'ragstore sync: the keys each source wrote chunks for, and an upper bound of their chunk count';

-- Per followed table: the queue depth, the age of the oldest change not synced (lag), keys in backoff, the
-- last error and the workers' rows per second (rows synced over the seconds spent syncing them).
CREATE VIEW ragstore.sync_status AS
SELECT s.family, s.schema_name, s.table_name, s.prefix,
       count(q.key) AS queued,
       count(q.key) FILTER (WHERE q.not_before > now()) AS backing_off,
       coalesce(extract(epoch FROM now() - min(q.queued_at)), 0)::double precision AS lag_seconds,
       (SELECT count(*) FROM ragstore.sync_rows r WHERE r.source_id = s.id) AS synced_keys,
       s.synced_rows,
       CASE WHEN s.synced_seconds > 0 THEN s.synced_rows / s.synced_seconds END AS rows_per_second,
       s.last_error, s.last_error_at
FROM ragstore.sync_sources s
LEFT JOIN ragstore.sync_queue q ON q.source_id = s.id
GROUP BY s.id;
COMMENT ON VIEW ragstore.sync_status IS
    'ragstore sync: per followed table the queue depth, lag (seconds), keys backing off, last error, rows/s';

-- section: after_0003_sync
-- Revision 0004_api_tokens: the bearer tokens of `ragstore serve`, kept hashed, the owner side's alone.
CREATE TABLE ragstore.api_tokens (
    id            bigint GENERATED ALWAYS AS IDENTITY,
    name          text NOT NULL CHECK (name ~ '^[A-Za-z0-9_.-]{1,64}$'),
    role          text NOT NULL CHECK (role ~ '\S'),
    token_sha256  bytea NOT NULL CHECK (length(token_sha256) = 32),
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz,
    revoked_at    timestamptz,
    CONSTRAINT api_tokens_pkey PRIMARY KEY (id)
);
CREATE UNIQUE INDEX api_tokens_live_name ON ragstore.api_tokens (name) WHERE revoked_at IS NULL;
COMMENT ON TABLE ragstore.api_tokens IS
    'ragstore serve: bearer tokens (SHA-256 of the secret), each mapped to a database role; owner-managed';
-- It belongs to ragstore_owner, like everything in the schema, and the default privileges would give the
-- app and the reader rights on it: it is the owner side's alone.
DO $revoke$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'ragstore_owner')
       AND pg_catalog.pg_has_role(current_user, 'ragstore_owner', 'SET') THEN
        ALTER TABLE ragstore.api_tokens OWNER TO ragstore_owner;
    END IF;
    IF (SELECT count(*) FROM pg_catalog.pg_roles WHERE rolname IN ('ragstore_app', 'ragstore_reader')) = 2 THEN
        REVOKE ALL ON ragstore.api_tokens FROM ragstore_app, ragstore_reader;
        REVOKE ALL ON SEQUENCE ragstore.api_tokens_id_seq FROM ragstore_app, ragstore_reader;
    END IF;
END
$revoke$;

-- section: after_0004_api_tokens
-- Revision 0005_sync_status: the view sync_status tells keys backing off from keys leased (new last column
-- leased). CREATE OR REPLACE keeps the view's grants.
CREATE OR REPLACE VIEW ragstore.sync_status AS
SELECT s.family, s.schema_name, s.table_name, s.prefix,
       count(q.key) AS queued,
       count(q.key) FILTER (WHERE q.attempts > 0 AND q.not_before > now()) AS backing_off,
       coalesce(extract(epoch FROM now() - min(q.queued_at)), 0)::double precision AS lag_seconds,
       (SELECT count(*) FROM ragstore.sync_rows r WHERE r.source_id = s.id) AS synced_keys,
       s.synced_rows,
       CASE WHEN s.synced_seconds > 0 THEN s.synced_rows / s.synced_seconds END AS rows_per_second,
       s.last_error, s.last_error_at,
       count(q.key) FILTER (WHERE q.attempts = 0 AND q.not_before > now()) AS leased
FROM ragstore.sync_sources s
LEFT JOIN ragstore.sync_queue q ON q.source_id = s.id
GROUP BY s.id;
COMMENT ON VIEW ragstore.sync_status IS
    'ragstore sync: per followed table the queue depth, lag (seconds), keys backing off and leased, last error, rows/s';

-- section: stamp
UPDATE ragstore.alembic_version SET version_num = '0006_baseline';

-- section: downgrade
-- The triggers `ragstore sync add` installed on followed tables (outside schema ragstore) go first: they
-- name the function sync_enqueue. Then every ragstore table (family tables included, and their data)
-- and function goes; the version table stays (Alembic empties it). The roles are cluster-wide and other
-- databases may use them: this database's grants are revoked, the schema given back to the migrating
-- role, the roles left in place.
DO $triggers$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT tg.tgname, tg.tgrelid::regclass AS rel FROM pg_trigger tg
             JOIN pg_proc p ON p.oid = tg.tgfoid JOIN pg_namespace n ON n.oid = p.pronamespace
             WHERE n.nspname = 'ragstore' AND p.proname = 'sync_enqueue' LOOP
        EXECUTE format('DROP TRIGGER %I ON %s', t.tgname, t.rel);
    END LOOP;
END
$triggers$;
DO $down$
DECLARE
    obj  record;
    r    text;
    me   text := current_user;
BEGIN
    FOR obj IN SELECT table_name FROM ragstore.families LOOP
        EXECUTE format('DROP TABLE IF EXISTS ragstore.%I CASCADE', obj.table_name);  -- and its view
    END LOOP;
    FOR obj IN
        SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'ragstore' AND c.relkind IN ('r', 'p') AND c.relname <> 'alembic_version'
    LOOP
        EXECUTE format('DROP TABLE IF EXISTS ragstore.%I CASCADE', obj.relname);
    END LOOP;
    FOR obj IN  -- what no table owns: the sequence of the sync queue
        SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'ragstore' AND c.relkind = 'S'
    LOOP
        EXECUTE format('DROP SEQUENCE IF EXISTS ragstore.%I', obj.relname);
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
