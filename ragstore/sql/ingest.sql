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
    fts_config      text,
    source_sha256   bytea
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
COPY ragstore_stage_chunks (chunk_id, package_path, text, content_sha256, record_sha256, metadata, fts_config,
                            source_sha256)
FROM STDIN (FORMAT BINARY)

-- name: copy_embeddings
COPY ragstore_stage_embeddings (chunk_id, package_path, embedding, model, content_sha256)
FROM STDIN (FORMAT BINARY)

-- name: lookup
-- What the family holds for a batch of ids: its chunk's record and content hashes, and its embedding's
-- content hash and model, and the chunk's source hash. The family table joins chunks on chunk_id (the same
-- value as the id's), which Citus needs to see: both are distributed on it.
SELECT c.chunk_id, c.record_sha256, c.content_sha256, e.content_sha256, e.model, c.source_sha256
FROM unnest(%(ids)s::text[]) AS i (chunk_id)
JOIN ragstore.chunks AS c ON c.family = %(family)s AND c.chunk_id = i.chunk_id
LEFT JOIN ragstore.{table} AS e ON e.chunk_id = c.chunk_id

-- name: merge_chunks
-- The family's own chunk rows: a chunk_id another family holds is another row, never touched here.
-- updated_at comes in as a value (the statement's now(), taken once) rather than a now() in DO UPDATE SET:
-- Citus accepts only immutable functions there, and this text runs unchanged on one node and on Citus.
INSERT INTO ragstore.chunks AS c
    (family, chunk_id, package_path, text, content_sha256, record_sha256, metadata, fts_config, source_sha256,
     updated_at)
SELECT %(family)s, chunk_id, package_path, text, content_sha256, record_sha256, metadata::jsonb,
       fts_config::regconfig, source_sha256, now()
FROM ragstore_stage_chunks
ORDER BY chunk_id
ON CONFLICT (family, chunk_id) DO UPDATE SET
    package_path   = EXCLUDED.package_path,
    text           = EXCLUDED.text,
    content_sha256 = EXCLUDED.content_sha256,
    record_sha256  = EXCLUDED.record_sha256,
    metadata       = EXCLUDED.metadata,
    fts_config     = EXCLUDED.fts_config,
    source_sha256  = EXCLUDED.source_sha256,
    updated_at     = CASE WHEN (c.record_sha256, c.content_sha256)
                               IS DISTINCT FROM (EXCLUDED.record_sha256, EXCLUDED.content_sha256)
                          THEN EXCLUDED.updated_at ELSE c.updated_at END
WHERE (c.record_sha256, c.content_sha256, c.source_sha256)
      IS DISTINCT FROM (EXCLUDED.record_sha256, EXCLUDED.content_sha256, EXCLUDED.source_sha256)
RETURNING c.chunk_id

-- name: merge_embeddings
-- The family table keeps a copy of its chunk's metadata (read by metadata filters, see families.sql),
-- taken from the chunk row merged before it in the same transaction.
INSERT INTO ragstore.{table} AS e (chunk_id, package_path, embedding, model, content_sha256, metadata)
SELECT s.chunk_id, s.package_path, s.embedding, s.model, s.content_sha256, coalesce(c.metadata, '{{}}'::jsonb)
FROM ragstore_stage_embeddings AS s
LEFT JOIN ragstore.chunks AS c ON c.family = {family} AND c.chunk_id = s.chunk_id
ORDER BY s.chunk_id
{upsert}

-- name: upsert_embedding
-- The end of both embedding merges ({upsert} in them): a row already there is updated only when it differs;
-- each row merged is returned with whether it was inserted.
ON CONFLICT (chunk_id) DO UPDATE SET
    package_path   = EXCLUDED.package_path,
    embedding      = EXCLUDED.embedding,
    model          = EXCLUDED.model,
    content_sha256 = EXCLUDED.content_sha256,
    metadata       = EXCLUDED.metadata
WHERE (e.content_sha256, e.model, e.package_path, e.embedding, e.metadata)
      IS DISTINCT FROM (EXCLUDED.content_sha256, EXCLUDED.model, EXCLUDED.package_path, EXCLUDED.embedding,
                        EXCLUDED.metadata)
RETURNING e.chunk_id, (e.xmax = 0) AS inserted

-- name: merge_embeddings_existing
-- The first merge of a batch: the vectors of chunks already stored (a changed record's new text and vector,
-- a model change), before the chunk merge, so that their HNSW inserts (the slow part of a re-run) run before
-- the chunk triggers take their locks on ragstore.chunk_term_df rows, which are held to commit: another
-- connection's batch waits for them only through this transaction's short tail. The rows merged leave the
-- staging table; merge_embeddings writes the rest (new chunks, whose row the chunk merge inserts first).
-- The metadata is the chunk's as it will be after this batch: the staged row's when the chunk is rewritten.
WITH moved AS (
    DELETE FROM ragstore_stage_embeddings AS s
    USING ragstore.chunks AS c
    WHERE c.family = {family} AND c.chunk_id = s.chunk_id
    RETURNING s.chunk_id, s.package_path, s.embedding, s.model, s.content_sha256, c.metadata
)
INSERT INTO ragstore.{table} AS e (chunk_id, package_path, embedding, model, content_sha256, metadata)
SELECT m.chunk_id, m.package_path, m.embedding, m.model, m.content_sha256,
       coalesce(sc.metadata::jsonb, m.metadata, '{{}}'::jsonb)
FROM moved AS m
LEFT JOIN ragstore_stage_chunks AS sc ON sc.chunk_id = m.chunk_id
ORDER BY m.chunk_id
{upsert}

-- name: term_df_lock_shared
-- The first lock of a merge transaction, before any row lock, when the merge changes chunks of one kind
-- only (all inserted, or all updated): its chunk trigger upserts the family's ragstore.chunk_term_df rows in
-- ONE call, in (family, lexeme) order, so two such transactions take those row locks in the same order and
-- never deadlock on them (one waits for the other).
-- Transaction-level: released at commit or rollback.
SELECT pg_advisory_xact_lock_shared(hashtext('ragstore.chunk_term_df'), hashtext(%(family)s))

-- name: term_df_lock
-- Taken before a merge that both inserts and updates chunks: its INSERT and UPDATE triggers upsert the df
-- rows in two calls, each sorted but not together, which could deadlock with another transaction's; this
-- one waits until no other writer of the family holds df locks, and holds them alone until commit. A batch
-- retried after a deadlock takes it too: taken first in its transaction, it then merges while no other
-- merge of the family holds a row lock, so the retry cannot deadlock again.
SELECT pg_advisory_xact_lock(hashtext('ragstore.chunk_term_df'), hashtext(%(family)s))

-- name: sync_package_path
-- A chunk that moved to another package, or whose metadata changed, keeps its vector; the family table's
-- copies of package_path and metadata follow.
UPDATE ragstore.{table} AS e
SET package_path = s.package_path, metadata = s.metadata::jsonb
FROM ragstore_stage_chunks AS s
WHERE e.chunk_id = s.chunk_id
  AND (e.package_path, e.metadata) IS DISTINCT FROM (s.package_path, s.metadata::jsonb)

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

-- name: lookup_sources
-- Byte-level change detection: the chunks of this family written from exactly these input bytes (source
-- hashes), whose vector is of the family's model and of the chunk's current text. Those records are unchanged.
SELECT c.source_sha256, c.chunk_id, c.package_path
FROM ragstore.chunks AS c
JOIN ragstore.{table} AS e
  ON e.chunk_id = c.chunk_id AND e.content_sha256 = c.content_sha256 AND e.model = %(model)s
WHERE c.source_sha256 = ANY (%(hashes)b::bytea[])
  AND c.family = %(family)s

-- name: family_is_empty
SELECT NOT EXISTS (SELECT 1 FROM ragstore.{table})

-- name: copy_chunks_direct
-- A bulk load into an empty family: new chunk rows straight into the table (fts_config as its oid, the
-- binary form of regconfig); a row already there fails the batch, which is then merged instead.
COPY ragstore.chunks (family, chunk_id, package_path, text, content_sha256, record_sha256, metadata, fts_config,
                      source_sha256)
FROM STDIN (FORMAT BINARY)

-- name: copy_family_direct
COPY ragstore.{table} (chunk_id, package_path, embedding, model, content_sha256, metadata)
FROM STDIN (FORMAT BINARY)

-- name: family_rows
-- The family table's row count as the planner knows it (no scan); NULL before its first VACUUM or ANALYZE.
SELECT CASE WHEN c.reltuples >= 0 THEN c.reltuples END
FROM pg_class AS c
WHERE c.oid = to_regclass(format('ragstore.%%I', %(table)s::text))

-- name: try_rebuild_lock
-- One rebuild of a family's graph at a time: two concurrent REINDEX … CONCURRENTLY of one index deadlock
-- (each waits for the other's transaction). A run that does not get this lock leaves the rebuild to the
-- run holding it. Session-level, released by rebuild_unlock.
SELECT pg_try_advisory_lock(hashtext('ragstore.rebuild_hnsw'), hashtext(%(table)s))

-- name: rebuild_unlock
SELECT pg_advisory_unlock(hashtext('ragstore.rebuild_hnsw'), hashtext(%(table)s))

-- name: rebuild_hnsw
-- A new graph of the live rows, built beside the old one, which searches use until the swap.
REINDEX INDEX CONCURRENTLY ragstore.{hnsw_index}

-- name: covering_entry_sizes
-- The bytes of each metadata value, as jsonb before compression, and of its largest value at one of the
-- keys: what a covering filter-key index entry holds of the row's metadata (see
-- ragstore/families/filter_keys.py, entry_problems).
SELECT pg_column_size(m),
       (SELECT coalesce(max(pg_column_size(m -> k)), 0) FROM unnest(%(keys)s::text[]) AS k)
FROM unnest(%(metadata)s::jsonb[]) WITH ORDINALITY AS t(m, i)
ORDER BY i
