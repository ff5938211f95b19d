-- ragstore.sync_enqueue, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- The trigger function of every table a family follows (`ragstore sync add`, ragstore/sync/): it queues the
-- key of each row inserted, deleted or whose followed columns changed (the triggers' UPDATE OF and WHEN
-- say which, ragstore/sql/sync.sql), and on TRUNCATE every key the source has written chunks for; then it
-- wakes the family's followers (NOTIFY ragstore_sync_<family>). Its one argument is the source's id; it
-- acts only for the table that source names (by oid, or by schema and name after a dump and restore), so a
-- trigger another table's owner points at a source queues nothing. SECURITY DEFINER, owned by
-- ragstore_owner: whoever changes the table needs no right on the queue. A key is the id's JSON text
-- (to_jsonb(id) #>> '{}'), the same the worker reads rows back by. A key already queued keeps its
-- backoff (a provider failing for it is not asked again sooner because the row changed again).
-- Called by: the triggers ragstore_sync_<id>_* on followed tables (never directly; PUBLIC has no EXECUTE).

CREATE OR REPLACE FUNCTION ragstore.sync_enqueue() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    v_source  bigint;
    v_family  text;
    v_id      text;
    v_old     text;
    v_new     text;
BEGIN
    SELECT s.id, s.family, s.id_column INTO v_source, v_family, v_id
    FROM ragstore.sync_sources s
    WHERE s.id = TG_ARGV[0]::bigint
      AND (s.table_oid = TG_RELID OR (s.schema_name = TG_TABLE_SCHEMA AND s.table_name = TG_TABLE_NAME));
    IF v_source IS NULL THEN
        RETURN NULL;  -- the source was removed (or this is not its table): nothing to follow
    END IF;
    IF TG_OP = 'TRUNCATE' THEN
        INSERT INTO ragstore.sync_queue AS q (source_id, key, seq)
        SELECT r.source_id, r.key, nextval('ragstore.sync_queue_seq') FROM ragstore.sync_rows r
        WHERE r.source_id = v_source
        ON CONFLICT (source_id, key) DO UPDATE SET seq = excluded.seq, changed_at = excluded.changed_at;
    ELSE
        IF TG_OP <> 'INSERT' THEN
            v_old := to_jsonb(OLD) -> v_id #>> '{}';
        END IF;
        IF TG_OP <> 'DELETE' THEN
            v_new := to_jsonb(NEW) -> v_id #>> '{}';
        END IF;
        INSERT INTO ragstore.sync_queue AS q (source_id, key, seq)
        SELECT v_source, k, nextval('ragstore.sync_queue_seq')
        FROM (SELECT DISTINCT k FROM unnest(ARRAY[v_old, v_new]) AS k WHERE k IS NOT NULL) AS keys
        ON CONFLICT (source_id, key) DO UPDATE SET seq = excluded.seq, changed_at = excluded.changed_at;
    END IF;
    PERFORM pg_notify('ragstore_sync_' || v_family, '');
    RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION ragstore.sync_enqueue() IS
    'ragstore sync: queues the keys of a followed table''s changed rows (trigger function, argument: source id)';
REVOKE ALL ON FUNCTION ragstore.sync_enqueue() FROM PUBLIC;
