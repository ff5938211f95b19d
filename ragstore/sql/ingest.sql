-- The write path (ragstore index). Rows reach Postgres by binary COPY into per-session staging tables,
-- then one INSERT ... SELECT ... ON CONFLICT merge per table and batch. {table} is a family table,
-- always filled through psycopg.sql.Identifier. Rows are merged in chunk_id order so that concurrent
-- writers take row locks in the same order.

-- name: create_stage
CREATE TEMP TABLE IF NOT EXISTS ragstore_stage_chunks (
    chunk_id        text,
    package_path    text,
    text            text,
    content_sha256  bytea,
    record_sha256   bytea,
    metadata        text,
    fts_config      text
) ON COMMIT DELETE ROWS;
CREATE TEMP TABLE IF NOT EXISTS ragstore_stage_embeddings (
    chunk_id        text,
    package_path    text,
    embedding       vector,
    model           text,
    content_sha256  bytea
) ON COMMIT DELETE ROWS;
CREATE TEMP TABLE IF NOT EXISTS ragstore_seen (chunk_id text PRIMARY KEY)

-- name: copy_chunks
COPY ragstore_stage_chunks (chunk_id, package_path, text, content_sha256, record_sha256, metadata, fts_config)
FROM STDIN (FORMAT BINARY)

-- name: copy_embeddings
COPY ragstore_stage_embeddings (chunk_id, package_path, embedding, model, content_sha256)
FROM STDIN (FORMAT BINARY)

-- name: lookup
-- What the family holds for a batch of ids: its chunk's record and content hashes, and its embedding's
-- content hash and model. The family table joins chunks on chunk_id (the same value as the id's), which
-- Citus needs to see: both are distributed on it.
SELECT c.chunk_id, c.record_sha256, c.content_sha256, e.content_sha256, e.model
FROM unnest(%(ids)s::text[]) AS i (chunk_id)
JOIN ragstore.chunks AS c ON c.family = %(family)s AND c.chunk_id = i.chunk_id
LEFT JOIN ragstore.{table} AS e ON e.chunk_id = c.chunk_id

-- name: merge_chunks
-- The family's own chunk rows: a chunk_id another family holds is another row, never touched here.
-- updated_at comes in as a value (the statement's now(), taken once) rather than a now() in DO UPDATE SET:
-- Citus accepts only immutable functions there, and this text runs unchanged on one node and on Citus.
INSERT INTO ragstore.chunks AS c
    (family, chunk_id, package_path, text, content_sha256, record_sha256, metadata, fts_config, updated_at)
SELECT %(family)s, chunk_id, package_path, text, content_sha256, record_sha256, metadata::jsonb,
       fts_config::regconfig, now()
FROM ragstore_stage_chunks
ORDER BY chunk_id
ON CONFLICT (family, chunk_id) DO UPDATE SET
    package_path   = EXCLUDED.package_path,
    text           = EXCLUDED.text,
    content_sha256 = EXCLUDED.content_sha256,
    record_sha256  = EXCLUDED.record_sha256,
    metadata       = EXCLUDED.metadata,
    fts_config     = EXCLUDED.fts_config,
    updated_at     = EXCLUDED.updated_at
WHERE (c.record_sha256, c.content_sha256) IS DISTINCT FROM (EXCLUDED.record_sha256, EXCLUDED.content_sha256)
RETURNING c.chunk_id

-- name: merge_embeddings
INSERT INTO ragstore.{table} AS e (chunk_id, package_path, embedding, model, content_sha256)
SELECT chunk_id, package_path, embedding, model, content_sha256
FROM ragstore_stage_embeddings
ORDER BY chunk_id
ON CONFLICT (chunk_id) DO UPDATE SET
    package_path   = EXCLUDED.package_path,
    embedding      = EXCLUDED.embedding,
    model          = EXCLUDED.model,
    content_sha256 = EXCLUDED.content_sha256
WHERE (e.content_sha256, e.model, e.package_path, e.embedding)
      IS DISTINCT FROM (EXCLUDED.content_sha256, EXCLUDED.model, EXCLUDED.package_path, EXCLUDED.embedding)
RETURNING e.chunk_id, (e.xmax = 0) AS inserted

-- name: sync_package_path
-- A chunk that moved to another package keeps its vector; the family table's copy of package_path follows.
UPDATE ragstore.{table} AS e
SET package_path = s.package_path
FROM ragstore_stage_chunks AS s
WHERE e.chunk_id = s.chunk_id AND e.package_path IS DISTINCT FROM s.package_path

-- name: copy_seen
COPY ragstore_seen (chunk_id) FROM STDIN (FORMAT BINARY)

-- name: prune
-- The family's chunks of the packages this run read (or of the folders it walked) that the input no
-- longer has; other families' chunks are never candidates.
WITH gone AS (
    DELETE FROM ragstore.chunks AS c
    WHERE c.family = %(family)s
      AND (c.package_path = ANY (%(packages)s::text[]) OR c.package_path LIKE ANY (%(prefixes)s::text[]))
      AND NOT EXISTS (SELECT 1 FROM ragstore_seen AS s WHERE s.chunk_id = c.chunk_id)
    RETURNING 1
)
SELECT count(*) FROM gone

-- name: family_is_empty
SELECT NOT EXISTS (SELECT 1 FROM ragstore.{table})
