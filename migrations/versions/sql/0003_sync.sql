-- Revision 0003_sync, frozen: the tables of `ragstore sync` as this revision made them (head is
-- ragstore/sql/schema.sql). Triggers a sync add installed on followed tables go with their sources:
-- the downgrade drops them first. The function sync_enqueue is a head file (ragstore/sql/functions/): it stays.

-- section: upgrade

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

-- section: downgrade

DO $down$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT tg.tgname, tg.tgrelid::regclass AS rel FROM pg_trigger tg
             JOIN pg_proc p ON p.oid = tg.tgfoid JOIN pg_namespace n ON n.oid = p.pronamespace
             WHERE n.nspname = 'ragstore' AND p.proname = 'sync_enqueue' LOOP
        EXECUTE format('DROP TRIGGER %I ON %s', t.tgname, t.rel);
    END LOOP;
END
$down$;
DROP VIEW ragstore.sync_status;
DROP TABLE ragstore.sync_rows;
DROP TABLE ragstore.sync_queue;
DROP SEQUENCE ragstore.sync_queue_seq;
DROP TABLE ragstore.sync_sources;
DROP FUNCTION IF EXISTS ragstore.sync_enqueue();
DELETE FROM ragstore.applied_files WHERE name = 'sync_enqueue.sql';
