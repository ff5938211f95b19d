-- Family model migration (ragstore.family_migrate). {old} is the family's serving table, {new} the one
-- being built; both filled through psycopg.sql.Identifier. {pending} is the pending_filter block below
-- (filled in by the code), or nothing where the new table does not exist yet.

-- name: begin
-- Record the target; refuses (no row) unless the family is 'ready'.
UPDATE ragstore.families
SET state = 'migrating',
    options = options || jsonb_build_object('target', %(target)s::jsonb),
    updated_at = now()
WHERE name = %(name)s AND state = 'ready'

-- name: try_lock
-- One migration per family at a time; the lock goes with the session (and with a killed process).
SELECT pg_try_advisory_lock(hashtextextended('ragstore.family_migrate:' || %(name)s, 0))

-- name: unlock
SELECT pg_advisory_unlock(hashtextextended('ragstore.family_migrate:' || %(name)s, 0))

-- name: pending_filter
-- Chunks the old table holds that the new one lacks, or holds for another text, package or metadata.
LEFT JOIN ragstore.{new} AS n ON n.chunk_id = o.chunk_id
WHERE (n.chunk_id IS NULL OR n.content_sha256 <> c.content_sha256 OR n.package_path <> c.package_path
       OR n.metadata <> c.metadata)

-- name: pending
-- The next batch of pending chunks (the pending_filter block) after chunk id "after".
SELECT o.chunk_id, c.package_path, c.text, c.content_sha256
FROM ragstore.{old} AS o
JOIN ragstore.chunks AS c ON c.family = o.family AND c.chunk_id = o.chunk_id
{pending}
  AND o.chunk_id > %(after)s
ORDER BY o.chunk_id
LIMIT %(limit)s

-- name: count_todo
-- The rows left to embed and how many of them the cache already holds: the pending ones (the
-- pending_filter block), or, for a dry run before the new table exists, every row of the old table.
SELECT count(*),
       count(*) FILTER (WHERE EXISTS (
           SELECT 1 FROM ragstore.embedding_cache AS k
           WHERE k.model = %(cache_key)s AND k.content_sha256 = c.content_sha256))
FROM ragstore.{old} AS o
JOIN ragstore.chunks AS c ON c.family = o.family AND c.chunk_id = o.chunk_id
{pending}

-- name: count_rows
SELECT count(*) FROM ragstore.{old}

-- name: sample
-- Texts for a dry run's timing: uncached ones, spread over the table by a hash of the id.
SELECT c.text
FROM ragstore.{old} AS o
JOIN ragstore.chunks AS c ON c.family = o.family AND c.chunk_id = o.chunk_id
WHERE NOT EXISTS (
    SELECT 1 FROM ragstore.embedding_cache AS k
    WHERE k.model = %(cache_key)s AND k.content_sha256 = c.content_sha256)
ORDER BY md5(o.chunk_id)
LIMIT %(limit)s

-- name: lock_family
SELECT state, options FROM ragstore.families WHERE name = %(name)s FOR UPDATE

-- name: lock_old
-- Writers wait from here to the swap's commit (readers do not): the last catch-up misses nothing.
LOCK TABLE ragstore.{old} IN SHARE ROW EXCLUSIVE MODE

-- name: drop_strays
-- Rows whose chunk left the old table during the backfill (a deleted chunk cascades by itself).
DELETE FROM ragstore.{new} AS n
WHERE NOT EXISTS (SELECT 1 FROM ragstore.{old} AS o WHERE o.chunk_id = n.chunk_id)

-- name: swap
UPDATE ragstore.families
SET backend = %(backend)s, model = %(model)s, dim = %(dim)s, vector_type = %(vector_type)s,
    table_name = %(table_name)s, state = 'ready', options = %(options)s, updated_at = now()
WHERE name = %(name)s

-- name: abort
UPDATE ragstore.families
SET state = 'ready', options = options - 'target', updated_at = now()
WHERE name = %(name)s

-- name: drop_table
DROP TABLE IF EXISTS ragstore.{old}
