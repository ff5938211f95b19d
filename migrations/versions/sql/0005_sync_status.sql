-- Revision 0005_sync_status, frozen: the view sync_status tells keys backing off (a failed batch's, not
-- before their retry) from keys leased (a worker syncing them now), in a new last column `leased`.
-- CREATE OR REPLACE keeps the view's grants; the downgrade puts back 0003's view.

-- section: upgrade

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

-- section: downgrade

DROP VIEW ragstore.sync_status;
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
    'ragstore sync: per followed table the queue depth, lag (seconds), keys backing off, last error, rows/s'
