-- The embedding cache (ragstore.embedding_cache): vectors by model key and sha256 of the text.
-- {table} is a family table, filled through psycopg.sql.Identifier.

-- name: create_stage
CREATE TEMP TABLE IF NOT EXISTS ragstore_stage_cache (
    content_sha256  bytea,
    embedding       vector
) ON COMMIT DELETE ROWS

-- name: lookup
SELECT content_sha256, embedding
FROM ragstore.embedding_cache
WHERE model = %(model)s AND content_sha256 = ANY (%(digests)s::bytea[])

-- name: copy_stage
COPY ragstore_stage_cache (content_sha256, embedding) FROM STDIN (FORMAT BINARY)

-- name: merge_stage
-- Concurrent writers may cache the same text: the first vector stays (they are equal anyway).
INSERT INTO ragstore.embedding_cache (model, content_sha256, embedding)
SELECT DISTINCT ON (content_sha256) %(model)s, content_sha256, embedding
FROM ragstore_stage_cache
ORDER BY content_sha256
ON CONFLICT (model, content_sha256) DO NOTHING

-- name: seed_from_family
-- A family table already holds model vectors by content hash: put them in the cache (what a family
-- indexed before the cache existed contributes when it migrates away from its model).
INSERT INTO ragstore.embedding_cache (model, content_sha256, embedding)
SELECT DISTINCT ON (e.content_sha256) %(model)s, e.content_sha256, e.embedding::vector
FROM ragstore.{table} AS e
WHERE e.model = %(row_model)s
ORDER BY e.content_sha256
ON CONFLICT (model, content_sha256) DO NOTHING

-- name: seed_from_positional_ids
-- The vectors of document chunks stored under positional ids (``<package_path>#<n>``, what ragstore
-- wrote before chunk ids were anchored in content) for these packages: put them in the cache, so that
-- the run that moves the documents to content-anchored ids embeds none of the texts it already holds.
INSERT INTO ragstore.embedding_cache (model, content_sha256, embedding)
SELECT DISTINCT ON (e.content_sha256) %(model)s, e.content_sha256, e.embedding::vector
FROM ragstore.chunks AS c
JOIN ragstore.{table} AS e ON e.chunk_id = c.chunk_id AND e.content_sha256 = c.content_sha256
WHERE c.family = %(family)s
  AND c.package_path = ANY (%(packages)s::text[])
  AND length(substring(c.chunk_id FROM '#([0-9]+)$')) < 10  -- a content-anchored id has 16 hex digits
  AND e.model = %(row_model)s
ORDER BY e.content_sha256
ON CONFLICT (model, content_sha256) DO NOTHING
