-- ragstore sync (ragstore/sync/): the tables a family follows, their triggers, the queue the triggers fill
-- and the worker's claims. Names of the source table, its columns and the triggers are placeholders
-- ({schema}, {table}, {trigger}, {columns}, {changed}, {id}, {id_type}) filled only with
-- psycopg.sql.Identifier values; {predicate} is the `--where` expression the table's owner gave, checked by
-- ragstore/sync/sources.py (one expression, no ';', read through a temporary view).

-- name: table_of
-- The table named, its owner and whether the current role may act as it (what CREATE TRIGGER needs).
SELECT c.oid, pg_get_userbyid(c.relowner), pg_has_role(current_user, c.relowner, 'USAGE'), c.relkind
FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relname = %(table)s

-- name: citus_table
-- Whether the table is one Citus distributes (or replicates, a reference table): asked only on Citus.
SELECT 1 FROM pg_dist_partition WHERE logicalrelid = %(oid)s::regclass

-- name: columns_of
SELECT a.attname, format_type(a.atttypid, a.atttypmod)
FROM pg_attribute AS a
WHERE a.attrelid = %(oid)s AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum

-- name: columns_of_table
SELECT a.attname, format_type(a.atttypid, a.atttypmod)
FROM pg_attribute AS a
WHERE a.attrelid = (SELECT c.oid FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
                    WHERE n.nspname = %(schema)s AND c.relname = %(table)s)
  AND a.attnum > 0 AND NOT a.attisdropped

-- name: where_view
-- A `--where` predicate checked: the database must accept it as the WHERE of a view over the table.
CREATE TEMP VIEW {view} AS SELECT 1 AS one FROM {schema}.{table} AS t WHERE ({expression})

-- name: value_view
-- A `--package` expression checked: the database must accept it as a value (made text) of the table's rows.
CREATE TEMP VIEW {view} AS SELECT ({expression})::text AS value FROM {schema}.{table} AS t

-- name: view_columns
-- The columns of the followed table the temporary view made of an expression reads (its rewrite rule's
-- dependencies): they are followed like the others.
SELECT DISTINCT a.attname
FROM pg_depend AS d
JOIN pg_rewrite AS r ON r.oid = d.objid
JOIN pg_attribute AS a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
WHERE r.ev_class = %(view)s::regclass AND d.refobjid = %(oid)s AND d.refobjsubid > 0

-- name: insert_source
INSERT INTO ragstore.sync_sources
    (family, prefix, schema_name, table_name, table_oid, id_column, text_columns, metadata_columns, package,
     predicate, followed)
VALUES (%(family)s, %(prefix)s, %(schema)s, %(table)s, %(oid)s, %(id)s, %(text)s, %(metadata)s, %(package)s,
        %(predicate)s, %(followed)s)
RETURNING id

-- name: trigger_insert
CREATE TRIGGER {trigger} AFTER INSERT ON {schema}.{table}
FOR EACH ROW EXECUTE FUNCTION ragstore.sync_enqueue({source})

-- name: trigger_update
-- Only an update of a followed column fires it (UPDATE OF), and only when one of them really changed (WHEN):
-- an update of any other column queues nothing.
CREATE TRIGGER {trigger} AFTER UPDATE OF {columns} ON {schema}.{table}
FOR EACH ROW WHEN ({changed}) EXECUTE FUNCTION ragstore.sync_enqueue({source})

-- name: trigger_delete
CREATE TRIGGER {trigger} AFTER DELETE ON {schema}.{table}
FOR EACH ROW EXECUTE FUNCTION ragstore.sync_enqueue({source})

-- name: trigger_truncate
CREATE TRIGGER {trigger} AFTER TRUNCATE ON {schema}.{table}
FOR EACH STATEMENT EXECUTE FUNCTION ragstore.sync_enqueue({source})

-- name: drop_trigger
DROP TRIGGER IF EXISTS {trigger} ON {schema}.{table}

-- name: backfill
-- Every row already in the table, queued (the predicate is the worker's: it reads rows through it).
INSERT INTO ragstore.sync_queue AS q (source_id, key, seq)
SELECT %(source)s, to_jsonb(t) ->> %(id)s, nextval('ragstore.sync_queue_seq') FROM {schema}.{table} AS t
ON CONFLICT (source_id, key) DO NOTHING

-- name: update_source
-- `sync alter`: what the source follows, changed in place (its id, triggers, queue and chunks stay).
UPDATE ragstore.sync_sources
SET text_columns = %(text)s, metadata_columns = %(metadata)s, package = %(package)s, predicate = %(predicate)s,
    followed = %(followed)s, altered_at = now()
WHERE id = %(source)s

-- name: lock_source
SELECT id FROM ragstore.sync_sources WHERE id = %(source)s FOR UPDATE

-- name: requeue_all
-- `sync alter` of the text columns: every row of the table, and every key with chunks (whose text may now be
-- blank), queued again; a key a worker holds gets a new seq, so the worker's old write is redone.
INSERT INTO ragstore.sync_queue AS q (source_id, key, seq)
SELECT %(source)s, k, nextval('ragstore.sync_queue_seq')
FROM (SELECT to_jsonb(t) ->> %(id)s AS k FROM {schema}.{table} AS t
      UNION SELECT r.key FROM ragstore.sync_rows AS r WHERE r.source_id = %(source)s) AS keys
ON CONFLICT (source_id, key) DO UPDATE SET seq = excluded.seq, changed_at = excluded.changed_at

-- name: requeue_synced
-- `sync alter` of the metadata columns or the package: the keys with chunks queued again (the writer sees
-- their text unchanged and embeds nothing).
INSERT INTO ragstore.sync_queue AS q (source_id, key, seq)
SELECT r.source_id, r.key, nextval('ragstore.sync_queue_seq')
FROM ragstore.sync_rows AS r WHERE r.source_id = %(source)s
ON CONFLICT (source_id, key) DO UPDATE SET seq = excluded.seq, changed_at = excluded.changed_at

-- name: requeue_where_changed
-- `sync alter` of the predicate: only the rows the old and the new predicate disagree on (entering or
-- leaving the family) queued again.
INSERT INTO ragstore.sync_queue AS q (source_id, key, seq)
SELECT %(source)s, to_jsonb(t) ->> %(id)s, nextval('ragstore.sync_queue_seq') FROM {schema}.{table} AS t
WHERE coalesce(({old}), false) IS DISTINCT FROM coalesce(({new}), false)
ON CONFLICT (source_id, key) DO UPDATE SET seq = excluded.seq, changed_at = excluded.changed_at

-- name: sources
SELECT id, family, prefix, schema_name, table_name, id_column, text_columns, metadata_columns, package,
       predicate, followed
FROM ragstore.sync_sources
WHERE %(families)s::text[] IS NULL OR family = ANY (%(families)s::text[])
ORDER BY family, schema_name, table_name

-- name: source_of
SELECT id, family, prefix, schema_name, table_name, id_column, text_columns, metadata_columns, package,
       predicate, followed
FROM ragstore.sync_sources
WHERE family = %(family)s AND schema_name = %(schema)s AND table_name = %(table)s

-- name: delete_source
DELETE FROM ragstore.sync_sources WHERE id = %(source)s

-- name: status
SELECT family, schema_name, table_name, prefix, queued, backing_off, lag_seconds, synced_keys, synced_rows,
       rows_per_second, last_error, last_error_at, leased
FROM ragstore.sync_status
ORDER BY family, schema_name, table_name

-- name: claim
-- Up to %(limit)s keys of the source due now, oldest change first, leased to this worker: a key another
-- worker holds (locked, or leased and not due) is skipped, never waited for.
UPDATE ragstore.sync_queue AS q
SET not_before = now() + make_interval(secs => %(lease)s)
FROM (SELECT source_id, key FROM ragstore.sync_queue
      WHERE source_id = %(source)s AND not_before <= now()
      ORDER BY seq LIMIT %(limit)s
      FOR UPDATE SKIP LOCKED) AS due
WHERE q.source_id = due.source_id AND q.key = due.key
RETURNING q.key, q.seq

-- name: bulk_due
-- The keys of the source due now (at most %(most)s), counted only when its family holds no chunk yet: a
-- backfill that the writer can load in bulk.
SELECT CASE WHEN EXISTS (SELECT 1 FROM ragstore.{table}) THEN 0
            ELSE (SELECT count(*) FROM (SELECT 1 FROM ragstore.sync_queue
                                        WHERE source_id = %(source)s AND not_before <= now()
                                        LIMIT %(most)s) AS due) END

-- name: renew
-- A big batch's lease extended (Renewal in ragstore/sync/worker.py), for the keys it claimed that are
-- still at the seq it claimed and still leased.
UPDATE ragstore.sync_queue AS q SET not_before = now() + make_interval(secs => %(lease)s)
FROM unnest(%(keys)s::text[], %(seqs)s::bigint[]) AS c (key, seq)
WHERE q.source_id = %(source)s AND q.key = c.key AND q.seq = c.seq AND q.not_before > now()

-- name: read_rows
-- The current rows of the claimed keys that the predicate keeps, each with its key (the id's JSON text) and
-- its package_path value ({package}: the column, the expression, or NULL).
SELECT to_jsonb(t) ->> %(id_name)s, to_jsonb(t), ({package})::text
FROM {schema}.{table} AS t
WHERE t.{id} = ANY (%(keys)s::{id_type}[]) AND ({predicate})

-- name: synced_keys
SELECT key, chunks FROM ragstore.sync_rows WHERE source_id = %(source)s AND key = ANY (%(keys)s::text[])

-- name: all_synced_keys
SELECT key, chunks FROM ragstore.sync_rows WHERE source_id = %(source)s

-- name: rows_writing
-- Before a batch's chunks are written: each key's bound raised to the chunks about to be written, so a
-- worker killed after writing them leaves no chunk a later delete would not find.
INSERT INTO ragstore.sync_rows AS r (source_id, key, chunks)
SELECT %(source)s, k, n FROM unnest(%(keys)s::text[], %(chunks)s::int[]) AS c (k, n)
ON CONFLICT (source_id, key) DO UPDATE SET chunks = greatest(r.chunks, excluded.chunks)

-- name: rows_written
-- After: each key's exact chunk count (the chunks beyond it were deleted in the same transaction).
INSERT INTO ragstore.sync_rows AS r (source_id, key, chunks)
SELECT %(source)s, k, n FROM unnest(%(keys)s::text[], %(chunks)s::int[]) AS c (k, n)
ON CONFLICT (source_id, key) DO UPDATE SET chunks = excluded.chunks

-- name: rows_unwritten
-- A failed batch: the keys it recorded that have no chunk after all (%(ids)s are the chunk ids each of
-- %(owners)s may have) are forgotten again, so the status counts only keys with chunks.
DELETE FROM ragstore.sync_rows AS r
WHERE r.source_id = %(source)s AND r.key = ANY (%(keys)s::text[])
  AND r.key NOT IN (SELECT o.key FROM unnest(%(ids)s::text[], %(owners)s::text[]) AS o (chunk_id, key)
                    JOIN ragstore.chunks AS c ON c.family = %(family)s AND c.chunk_id = o.chunk_id)

-- name: rows_gone
DELETE FROM ragstore.sync_rows WHERE source_id = %(source)s AND key = ANY (%(keys)s::text[])

-- name: finish
-- The claimed keys synced: gone from the queue unless changed again meanwhile (a newer seq), in which case
-- they are due again at once.
WITH claimed AS (
    SELECT * FROM unnest(%(keys)s::text[], %(seqs)s::bigint[]) AS c (key, seq)
), done AS (
    DELETE FROM ragstore.sync_queue AS q USING claimed AS c
    WHERE q.source_id = %(source)s AND q.key = c.key AND q.seq = c.seq
    RETURNING q.key
)
UPDATE ragstore.sync_queue AS q SET not_before = '-infinity', attempts = 0, last_error = NULL
FROM claimed AS c
WHERE q.source_id = %(source)s AND q.key = c.key AND c.key NOT IN (SELECT key FROM done)

-- name: counted
UPDATE ragstore.sync_sources
SET synced_rows = synced_rows + %(rows)s, synced_seconds = synced_seconds + %(seconds)s, last_error = NULL
WHERE id = %(source)s

-- name: failed
-- A batch that failed (its provider, a bad row): its keys back off, the other sources' keys are untouched.
UPDATE ragstore.sync_queue AS q
SET attempts = attempts + 1, last_error = %(error)s,
    not_before = now() + make_interval(secs => least(%(most)s, %(base)s * power(2, attempts)))
WHERE q.source_id = %(source)s AND q.key = ANY (%(keys)s::text[])

-- name: source_failed
UPDATE ragstore.sync_sources SET last_error = %(error)s, last_error_at = now() WHERE id = %(source)s

-- name: family_sources
SELECT id, schema_name, table_name FROM ragstore.sync_sources WHERE family = %(family)s
