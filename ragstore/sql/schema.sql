-- The ragstore schema at head: every table, index, trigger, policy, role and grant of schema ragstore.
--
-- This file and the functions in ragstore/sql/functions/ (one file per function) ARE the current database:
-- `ragstore migrate` builds an empty database from them, in this order, and stamps it at the newest
-- revision:
--   1. section "tables"    the extension, the tables, their indexes and comments, row-level security on;
--   2. every file of ragstore/sql/functions/ (CREATE OR REPLACE; the policies and triggers name them);
--   3. section "bindings"  the triggers and the row-level security policies;
--   4. section "grants"    the three group roles, ownership, and who may do what.
-- A database created before gets the same through migrations/versions/ (0006_baseline upgrades one made by
-- a revision it replaced), and tests/integration/test_schema.py checks that both ways give the same catalog.
-- Family tables (ragstore.emb_<family>, made by `ragstore family create`) are not here: their statements
-- are in ragstore/sql/families.sql.
--
-- Column order is the order in which the columns came (ragstore.chunks.family and source_sha256 last):
-- a database made earlier has them so, and COPY and SELECT * read them in that order everywhere.

-- section: tables

CREATE EXTENSION IF NOT EXISTS vector;

-- ---------------------------------------------------------------------------------------------------
-- Families and their chunks
-- ---------------------------------------------------------------------------------------------------

-- One row per embedding space. Each family has its own table ragstore.<table_name> (ragstore/sql/families.sql).
CREATE TABLE ragstore.families (
    name         text NOT NULL CHECK (name ~ '^[a-z][a-z0-9_]{0,47}$'),
    backend      text NOT NULL,
    model        text NOT NULL,
    dim          integer NOT NULL CHECK (dim BETWEEN 1 AND 16000),
    vector_type  text NOT NULL DEFAULT 'vector' CHECK (vector_type IN ('vector', 'halfvec')),
    table_name   text NOT NULL CHECK (table_name ~ '^emb_[a-z0-9_]{1,58}$'),
    state        text NOT NULL DEFAULT 'ready' CHECK (state IN ('ready', 'migrating')),
    options      jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT families_pkey PRIMARY KEY (name),
    CONSTRAINT families_table_name_key UNIQUE (table_name)
);
COMMENT ON TABLE ragstore.families IS 'ragstore embedding families: one backend + model + dimension each';
COMMENT ON COLUMN ragstore.families.options IS 'backend options (base URL, dimensions); never secrets';

-- Each family's own chunks: two families holding one chunk_id hold two independent rows. content_sha256
-- is the SHA-256 of text (the embedding cache key); record_sha256 covers package_path, text and metadata
-- (what makes a re-run a no-op); source_sha256 is the hash of the input bytes a chunk was last written from
-- (one JSONL line, one Parquet/NumPy row), so a rerun skips an unchanged record without parsing it; NULL
-- (documents) means "compare the parsed record".
CREATE TABLE ragstore.chunks (
    chunk_id        text NOT NULL,
    package_path    text NOT NULL,
    text            text NOT NULL,
    content_sha256  bytea NOT NULL CHECK (length(content_sha256) = 32),
    record_sha256   bytea NOT NULL CHECK (length(record_sha256) = 32),
    metadata        jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(metadata) = 'object'),
    fts_config      regconfig NOT NULL DEFAULT 'english',
    tsv             tsvector GENERATED ALWAYS AS (to_tsvector(fts_config, text)) STORED,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    family          text NOT NULL,
    source_sha256   bytea,
    CONSTRAINT chunks_pkey PRIMARY KEY (family, chunk_id),
    CONSTRAINT chunks_family_fkey FOREIGN KEY (family) REFERENCES ragstore.families (name) ON DELETE CASCADE
);
CREATE INDEX chunks_family_package_path_idx ON ragstore.chunks (family, package_path text_pattern_ops);
CREATE INDEX chunks_tsv_idx ON ragstore.chunks USING gin (tsv);
CREATE INDEX chunks_metadata_idx ON ragstore.chunks USING gin (metadata jsonb_path_ops);
CREATE INDEX chunks_source_sha256 ON ragstore.chunks (source_sha256) WHERE source_sha256 IS NOT NULL;
COMMENT ON TABLE ragstore.chunks IS
    'ragstore chunks: text, metadata and full text of each family''s own chunks, keyed (family, chunk_id)';

-- Which folder (its resolved absolute path, on which host) last wrote each package prefix of a family: a
-- run from another root is refused before it writes anything (ragstore/ingest/roots.py).
CREATE TABLE ragstore.family_sources (
    family         text NOT NULL,
    prefix         text NOT NULL CHECK (prefix <> '' AND strpos(prefix, '/') = 0),
    root           text NOT NULL,
    host           text NOT NULL,
    first_written  timestamptz NOT NULL DEFAULT now(),
    last_written   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT family_sources_pkey PRIMARY KEY (family, prefix),
    CONSTRAINT family_sources_family_fkey FOREIGN KEY (family)
        REFERENCES ragstore.families (name) ON DELETE CASCADE
);
COMMENT ON TABLE ragstore.family_sources IS
    'which folder (root path and host) last wrote the documents under each package prefix of a family';

-- Embeddings by content: re-indexing a renamed file, or migrating a family back to a model it used before,
-- finds its vectors here instead of calling the backend again. The column is an unconstrained vector so
-- one table serves every dimension up to pgvector's storage limit (16,000); halfvec families cache the
-- full-precision float32 vector and cast it when they store it.
CREATE TABLE ragstore.embedding_cache (
    model           text NOT NULL,
    content_sha256  bytea NOT NULL CHECK (length(content_sha256) = 32),
    embedding       vector NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT embedding_cache_pkey PRIMARY KEY (model, content_sha256)
);
COMMENT ON TABLE ragstore.embedding_cache IS
    'ragstore embedding cache: model key "backend:model:dim" (with "@endpoint" for HTTP providers) + sha256 of the text -> its vector';

-- ---------------------------------------------------------------------------------------------------
-- Full-text statistics (BM25), written by the chunk triggers alone (section "bindings")
-- ---------------------------------------------------------------------------------------------------

-- The postings: a chunk's rows are exactly ragstore.tsv_terms(tsv) of its stored row, the length row ''
-- included. No foreign key (one check per posting would cost more than the triggers that keep them) and
-- one index, the primary key, which BM25 reads and the delete and text-change triggers delete through.
CREATE TABLE ragstore.chunk_terms (
    family   text    NOT NULL,
    chunk_id text    NOT NULL,
    lexeme   text    NOT NULL,
    tf       integer NOT NULL,
    dl       integer NOT NULL,
    CONSTRAINT chunk_terms_pkey PRIMARY KEY (family, lexeme, chunk_id) INCLUDE (tf, dl)
);
COMMENT ON TABLE ragstore.chunk_terms IS
    'ragstore: full-text postings (family, lexeme, chunk_id, tf, dl) of every chunk; lexeme '''' is the chunk''s length row';

-- Each word's document frequency per family, so BM25 reads the postings once.
CREATE TABLE ragstore.chunk_term_df (
    family text    NOT NULL,
    lexeme text    NOT NULL,
    df     integer NOT NULL,
    CONSTRAINT chunk_term_df_pkey PRIMARY KEY (family, lexeme) INCLUDE (df)
);
COMMENT ON TABLE ragstore.chunk_term_df IS
    'ragstore: per family and word, the number of the family''s chunks holding it (kept by the chunk triggers)';

-- The ledger: every statement that inserts or deletes chunks appends one row per family it touched; a
-- family's chunk count N and total length are the sums of its rows (as many rows as write statements, and
-- no lock shared by concurrent writers).
CREATE TABLE ragstore.family_chunk_deltas (
    id     bigint GENERATED ALWAYS AS IDENTITY,
    family text   NOT NULL,
    delta  bigint NOT NULL,
    tokens bigint NOT NULL DEFAULT 0,
    CONSTRAINT family_chunk_deltas_pkey PRIMARY KEY (id)
);
CREATE INDEX family_chunk_deltas_family_idx ON ragstore.family_chunk_deltas (family) INCLUDE (delta);
COMMENT ON TABLE ragstore.family_chunk_deltas IS
    'ragstore: chunks (delta) and lexeme occurrences (tokens) added (+) or removed (-) per family and write statement';

-- ---------------------------------------------------------------------------------------------------
-- Agent memory: five append-only stores, isolated per agent by row-level security
-- ---------------------------------------------------------------------------------------------------

-- One table holds the five stores (a store column): the same shape, the same append-only rule (the
-- trigger ragstore.memory_append_only) and one policy. Composition reads one store of one agent newest
-- first, id ascending (code point order: id is "C").
CREATE TABLE ragstore.memory (
    agent       text NOT NULL CHECK (agent ~ '^[A-Za-z0-9_.-]{1,64}$'),
    id          text COLLATE "C" NOT NULL CHECK (id ~ '\S'),
    store       text NOT NULL
                CHECK (store IN ('episodic', 'semantic', 'procedural', 'decision', 'transcript')),
    at          timestamptz NOT NULL,
    content     text NOT NULL CHECK (content ~ '\S'),
    salience    double precision NOT NULL DEFAULT 0.5 CHECK (salience >= 0 AND salience <= 1),
    confidence  double precision NOT NULL DEFAULT 0.5 CHECK (confidence >= 0 AND confidence <= 1),
    tags        text[] NOT NULL DEFAULT '{}',
    metadata    jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(metadata) = 'object'),
    tsv         tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, content)) STORED,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT memory_pkey PRIMARY KEY (agent, id)
);
CREATE INDEX memory_read_idx ON ragstore.memory (agent, store, at DESC, id);
COMMENT ON TABLE ragstore.memory IS
    'ragstore agent memory: five append-only stores; erase only with ragstore.memory_forget()';

-- Who erased what and why, never the content. The identity columns are the database's
-- (ragstore.memory_forget_log_identity overwrites whatever an INSERT says).
CREATE TABLE ragstore.memory_forget_log (
    log_id        bigint GENERATED ALWAYS AS IDENTITY,
    agent         text NOT NULL,
    store         text NOT NULL,
    record_id     text COLLATE "C" NOT NULL,
    reason        text NOT NULL CHECK (reason ~ '\S'),
    forgotten_by  text NOT NULL DEFAULT session_user,  -- the login role
    acting_role   text NOT NULL,                       -- current_user of ragstore.memory_forget
    forgotten_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT memory_forget_log_pkey PRIMARY KEY (log_id)
);
COMMENT ON TABLE ragstore.memory_forget_log IS
    'ragstore memory erasures: who, when, which record and why; never the content';

-- Embeddings of memory records for recall, one row per record and model. An unconstrained vector, so
-- every backend shares the table; recall ranks one agent's records exactly (no HNSW at memory scale).
CREATE TABLE ragstore.memory_embeddings (
    agent      text NOT NULL,
    id         text COLLATE "C" NOT NULL,
    model      text NOT NULL,
    dim        integer NOT NULL CHECK (dim BETWEEN 1 AND 16000),
    embedding  vector NOT NULL CHECK (vector_dims(embedding) = dim),
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT memory_embeddings_pkey PRIMARY KEY (agent, model, id),
    CONSTRAINT memory_embeddings_agent_id_fkey FOREIGN KEY (agent, id)
        REFERENCES ragstore.memory (agent, id) ON DELETE CASCADE
);
COMMENT ON TABLE ragstore.memory_embeddings IS 'ragstore memory recall: record embeddings, one row per model';

-- Which database roles act for which memory agent, written by the owner side only. A session acts for
-- agent A when its current_user has the privileges of a role bound to A (ragstore.memory_agents()); a
-- binding to a role that does not exist grants nothing.
CREATE TABLE ragstore.agent_principals (
    agent       text NOT NULL CHECK (agent ~ '^[A-Za-z0-9_.-]{1,64}$'),
    role_name   text NOT NULL CHECK (role_name ~ '\S'),
    granted_by  text NOT NULL DEFAULT session_user,
    granted_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT agent_principals_pkey PRIMARY KEY (agent, role_name)
);
COMMENT ON TABLE ragstore.agent_principals IS
    'ragstore memory: which database roles act for which agent; written by the owner side only';

-- The bearer tokens of `ragstore serve` (ragstore/serve/tokens.py), read and written by the owner side only: each maps
-- to a database role the server's requests run as; only the SHA-256 of the secret is kept. A name is unique
-- among the tokens not revoked.
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

-- Row-level security, FORCE so the owner is bound too (the policies, section "bindings", let it see all).
ALTER TABLE ragstore.memory ENABLE ROW LEVEL SECURITY;
ALTER TABLE ragstore.memory FORCE ROW LEVEL SECURITY;
ALTER TABLE ragstore.memory_embeddings ENABLE ROW LEVEL SECURITY;
ALTER TABLE ragstore.memory_embeddings FORCE ROW LEVEL SECURITY;
ALTER TABLE ragstore.memory_forget_log ENABLE ROW LEVEL SECURITY;
ALTER TABLE ragstore.memory_forget_log FORCE ROW LEVEL SECURITY;

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

-- Per followed table: the queue depth, the age of the oldest change not synced (lag), keys in backoff (a
-- failed batch's, waiting for their retry), the last error, the workers' rows per second (rows synced over
-- the seconds spent syncing them) and keys leased (a worker syncing them now).
CREATE VIEW ragstore.sync_status AS
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

-- ---------------------------------------------------------------------------------------------------
-- Bookkeeping of `ragstore migrate`
-- ---------------------------------------------------------------------------------------------------

-- The revision the database is at: Alembic's table, made here for a database built from this file (it
-- stays, empty, after a downgrade to base).
CREATE TABLE IF NOT EXISTS ragstore.alembic_version (
    version_num varchar(32) NOT NULL,
    CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
);

-- This one holds the SHA-256 of
-- each file of ragstore/sql/functions/ (and of section "grants" below) as last applied: `ragstore migrate`
-- re-applies a file whose text changed, and only those.
CREATE TABLE ragstore.applied_files (
    name        text NOT NULL,
    sha256      bytea NOT NULL CHECK (length(sha256) = 32),
    applied_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT applied_files_pkey PRIMARY KEY (name)
);
COMMENT ON TABLE ragstore.applied_files IS
    'ragstore migrate: the SHA-256 of each replaceable file (ragstore/sql/functions/*.sql, grants) as last applied';

-- section: bindings

-- ---------------------------------------------------------------------------------------------------
-- Triggers. On Citus the chunk and registry triggers are dropped before the tables are laid out
-- (ragstore/sql/citus.sql): there full text reads the chunks' tsv instead of the statistics.
-- ---------------------------------------------------------------------------------------------------

-- The full-text statistics follow every chunk statement (ragstore/sql/functions/chunks_*.sql).
CREATE TRIGGER chunks_count_insert AFTER INSERT ON ragstore.chunks
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ragstore.chunks_count_inserted();
CREATE TRIGGER chunks_count_delete AFTER DELETE ON ragstore.chunks
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION ragstore.chunks_count_deleted();
CREATE TRIGGER chunks_count_truncate AFTER TRUNCATE ON ragstore.chunks
    FOR EACH STATEMENT EXECUTE FUNCTION ragstore.chunks_count_truncated();
CREATE TRIGGER chunks_terms_update AFTER UPDATE ON ragstore.chunks
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION ragstore.chunks_terms_updated();

-- A family dropped or created starts its statistics from nothing.
CREATE TRIGGER families_stats_drop AFTER DELETE ON ragstore.families
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION ragstore.families_stats_reset();
CREATE TRIGGER families_stats_create AFTER INSERT ON ragstore.families
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ragstore.families_stats_reset();

-- Memory is append-only: no UPDATE, no TRUNCATE, a DELETE only by the owner inside ragstore.memory_forget.
CREATE TRIGGER memory_append_only BEFORE UPDATE OR DELETE ON ragstore.memory
    FOR EACH ROW EXECUTE FUNCTION ragstore.memory_append_only();
CREATE TRIGGER memory_no_truncate BEFORE TRUNCATE ON ragstore.memory
    FOR EACH STATEMENT EXECUTE FUNCTION ragstore.memory_append_only();
CREATE TRIGGER memory_forget_log_append_only BEFORE UPDATE OR DELETE ON ragstore.memory_forget_log
    FOR EACH ROW EXECUTE FUNCTION ragstore.memory_append_only();
CREATE TRIGGER memory_forget_log_no_truncate BEFORE TRUNCATE ON ragstore.memory_forget_log
    FOR EACH STATEMENT EXECUTE FUNCTION ragstore.memory_append_only();
CREATE TRIGGER memory_forget_log_identity BEFORE INSERT ON ragstore.memory_forget_log
    FOR EACH ROW EXECUTE FUNCTION ragstore.memory_forget_log_identity();

-- ---------------------------------------------------------------------------------------------------
-- Row-level security by identity: the owner side sees every agent, any other role the agents bound to it
-- in ragstore.agent_principals. Each function sits in a scalar subquery, so it runs once per statement
-- (an InitPlan), not once per row; neither reads a setting the caller could set.
-- ---------------------------------------------------------------------------------------------------

CREATE POLICY memory_agent_isolation ON ragstore.memory
    USING ((SELECT ragstore.acts_as_owner()) OR agent = ANY ((SELECT ragstore.memory_agents())::text[]))
    WITH CHECK ((SELECT ragstore.acts_as_owner()) OR agent = ANY ((SELECT ragstore.memory_agents())::text[]));
CREATE POLICY memory_embeddings_agent_isolation ON ragstore.memory_embeddings
    USING ((SELECT ragstore.acts_as_owner()) OR agent = ANY ((SELECT ragstore.memory_agents())::text[]))
    WITH CHECK ((SELECT ragstore.acts_as_owner()) OR agent = ANY ((SELECT ragstore.memory_agents())::text[]));
CREATE POLICY memory_forget_log_read ON ragstore.memory_forget_log FOR SELECT
    USING ((SELECT ragstore.acts_as_owner()) OR agent = ANY ((SELECT ragstore.memory_agents())::text[]));
-- Only the owner side writes the log (and so reaches the append-only trigger with an UPDATE or DELETE).
CREATE POLICY memory_forget_log_owner ON ragstore.memory_forget_log
    USING ((SELECT ragstore.acts_as_owner()))
    WITH CHECK ((SELECT ragstore.acts_as_owner()));

-- section: grants

-- Three NOLOGIN group roles (cluster-wide: created when missing, never dropped here):
--   ragstore_owner   owns schema ragstore and everything in it: `ragstore migrate`, `family create/drop/
--                    migrate`, the registry, agent bindings, memory erasure (ragstore.memory_forget)
--   ragstore_app     indexes and searches: DML on chunks, family tables and the embedding cache, EXECUTE,
--                    TEMP tables; reads the registry; appends and reads the memory of the agents bound to it
--   ragstore_reader  SELECT and EXECUTE only; reads the memory of the agents bound to it
-- People and services log in as their own role and inherit one of these (docs/guide/roles.md).
-- When the migrating role may not create roles and they are missing, this block does nothing but say so;
-- a DBA creates the roles (sql/roles.sql) and `ragstore migrate` applies this block then.
-- Re-applied by `ragstore migrate` whenever its text changes: every statement sets the state, none adds.
DO $grants$
DECLARE
    r        text;
    obj      record;
    me       text := current_user;
    may      boolean;
    missing  boolean := false;
BEGIN
    SELECT rolsuper OR rolcreaterole INTO may FROM pg_roles WHERE rolname = me;
    FOREACH r IN ARRAY ARRAY['ragstore_owner', 'ragstore_app', 'ragstore_reader'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
            IF may THEN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r);
            ELSE
                missing := true;
            END IF;
        END IF;
    END LOOP;
    IF missing THEN
        RAISE NOTICE 'ragstore: % may not create roles; ask a DBA to run sql/roles.sql, then migrate again', me;
        RETURN;
    END IF;

    -- The migrating role must be able to act as the owner (ALTER ... OWNER, later migrations, families).
    IF NOT pg_has_role(me, 'ragstore_owner', 'MEMBER') THEN
        EXECUTE format('GRANT ragstore_owner TO %I', me);
    END IF;

    -- Everything in the schema belongs to ragstore_owner, family tables a superuser made included (as their
    -- owner, ragstore_owner maintains them: the SECURITY DEFINER functions rely on it). Identity sequences
    -- follow their table.
    IF (SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'ragstore') <> 'ragstore_owner' THEN
        ALTER SCHEMA ragstore OWNER TO ragstore_owner;
    END IF;
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
        SELECT p.oid::regprocedure AS sig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'ragstore' AND pg_get_userbyid(p.proowner) <> 'ragstore_owner'
          AND pg_has_role(me, p.proowner, 'USAGE')
    LOOP
        EXECUTE format('ALTER FUNCTION %s OWNER TO ragstore_owner', obj.sig);
    END LOOP;

    -- The schema and the database: nobody but the owner creates objects in the schema.
    REVOKE CREATE ON SCHEMA ragstore FROM PUBLIC;
    GRANT USAGE ON SCHEMA ragstore TO ragstore_app, ragstore_reader;
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO ragstore_app, ragstore_reader', current_database());
    EXECUTE format('GRANT TEMPORARY ON DATABASE %I TO ragstore_app', current_database());

    -- Tables: exactly these rights (family tables get theirs from the default privileges below).
    REVOKE ALL ON ragstore.families, ragstore.chunks, ragstore.family_sources, ragstore.embedding_cache,
        ragstore.chunk_terms, ragstore.chunk_term_df, ragstore.family_chunk_deltas, ragstore.memory,
        ragstore.memory_forget_log, ragstore.memory_embeddings, ragstore.agent_principals,
        ragstore.applied_files FROM ragstore_app, ragstore_reader;
    -- The API tokens of `ragstore serve` are the owner side's alone (a database upgraded from before
    -- revision 0004_api_tokens gets the table after a first run of these grants).
    IF to_regclass('ragstore.api_tokens') IS NOT NULL THEN
        REVOKE ALL ON ragstore.api_tokens FROM ragstore_app, ragstore_reader;
        REVOKE ALL ON SEQUENCE ragstore.api_tokens_id_seq FROM ragstore_app, ragstore_reader;
    END IF;
    -- What the app writes: chunks, the embedding cache, the roots of its own runs, memory (append only).
    GRANT SELECT, INSERT, UPDATE, DELETE ON ragstore.chunks, ragstore.embedding_cache TO ragstore_app;
    GRANT SELECT, INSERT, UPDATE ON ragstore.family_sources TO ragstore_app;
    GRANT SELECT, INSERT ON ragstore.memory, ragstore.memory_embeddings TO ragstore_app;
    -- The registry and the bindings are the owner's; the statistics the chunk triggers'; the erasure log
    -- ragstore.memory_forget's: app and reader read them all.
    GRANT SELECT ON ragstore.families, ragstore.chunks, ragstore.family_sources, ragstore.embedding_cache,
        ragstore.chunk_terms, ragstore.chunk_term_df, ragstore.family_chunk_deltas, ragstore.memory,
        ragstore.memory_forget_log, ragstore.memory_embeddings, ragstore.agent_principals,
        ragstore.applied_files TO ragstore_app, ragstore_reader;
    REVOKE ALL ON SEQUENCE ragstore.family_chunk_deltas_id_seq, ragstore.memory_forget_log_log_id_seq
        FROM ragstore_app, ragstore_reader;
    GRANT USAGE, SELECT ON SEQUENCE ragstore.family_chunk_deltas_id_seq, ragstore.memory_forget_log_log_id_seq
        TO ragstore_app;
    GRANT SELECT ON SEQUENCE ragstore.memory_forget_log_log_id_seq TO ragstore_reader;
    -- Sync (ragstore/sync/): the owner side registers tables and installs their triggers (whose definer
    -- function alone queues keys); workers, as the app, claim and delete queued keys, record the keys
    -- they wrote and their own counters; the reader reads them all.
    -- (Guarded: a database of the old chain is bridged at the baseline, before revision 0003 made them.)
    IF to_regclass('ragstore.sync_sources') IS NOT NULL THEN
        REVOKE ALL ON ragstore.sync_sources, ragstore.sync_queue, ragstore.sync_rows, ragstore.sync_status
            FROM ragstore_app, ragstore_reader;
        REVOKE ALL ON SEQUENCE ragstore.sync_queue_seq, ragstore.sync_sources_id_seq FROM ragstore_app, ragstore_reader;
        GRANT SELECT ON ragstore.sync_sources, ragstore.sync_queue, ragstore.sync_rows, ragstore.sync_status
            TO ragstore_app, ragstore_reader;
        GRANT UPDATE (synced_rows, synced_seconds, last_error, last_error_at) ON ragstore.sync_sources TO ragstore_app;
        GRANT UPDATE, DELETE ON ragstore.sync_queue TO ragstore_app;
        GRANT INSERT, UPDATE, DELETE ON ragstore.sync_rows TO ragstore_app;
    END IF;
    -- The migration history is the owner's: app and reader may read it (migrate --status), never move it.
    REVOKE ALL ON ragstore.alembic_version FROM ragstore_app, ragstore_reader;
    GRANT SELECT ON ragstore.alembic_version TO ragstore_app, ragstore_reader;

    -- Functions: every one for app and reader, except these (each file of ragstore/sql/functions/ revokes
    -- PUBLIC's EXECUTE where it must): the trigger functions (nobody calls them), the erasure (the owner
    -- alone), a bulk load's index work (the app and the owner).
    GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA ragstore TO ragstore_app, ragstore_reader;
    REVOKE ALL ON FUNCTION ragstore.chunks_count_inserted(), ragstore.chunks_count_deleted(),
        ragstore.chunks_terms_updated(), ragstore.chunks_count_truncated(), ragstore.families_stats_reset(),
        ragstore.memory_forget(text, text, text), ragstore.sync_enqueue()
        FROM ragstore_app, ragstore_reader;
    REVOKE ALL ON FUNCTION ragstore.family_bulk_drop_hnsw(text), ragstore.family_bulk_cluster(text),
        ragstore.family_build_hnsw(text) FROM ragstore_reader;

    -- Objects made later (family tables, later revisions), by the owner role or by the migrating role.
    FOREACH r IN ARRAY ARRAY['ragstore_owner', me] LOOP
        EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA ragstore '
                       'GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO ragstore_app', r);
        EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA ragstore '
                       'GRANT SELECT ON TABLES TO ragstore_reader', r);
        EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA ragstore '
                       'GRANT USAGE, SELECT ON SEQUENCES TO ragstore_app', r);
        EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA ragstore '
                       'GRANT EXECUTE ON FUNCTIONS TO ragstore_app, ragstore_reader', r);
    END LOOP;
END
$grants$
