-- The read path on Citus: the blocks of search.sql that Citus cannot plan as written, in a form it
-- pushes to every shard. Same parameters, same columns, same order (score DESC, chunk_id ASC).
-- - No settings subquery: Citus plans a LIMIT subquery laterally joined to another subquery only on the
--   coordinator ("cannot push down this subquery"); the HNSW settings are SET LOCAL and propagated to
--   the workers instead (ragstore.search.vector).
-- - The distance is an expression, not a LATERAL subquery.
-- - The exact path's stream reads rows, not heap-page ranges (a ctid means nothing across shards).

-- name: hnsw
-- The inner ORDER BY ... LIMIT runs on each shard's HNSW index; the coordinator merges the shards' top k
-- and joins the k rows to their chunks.
SELECT t.chunk_id, t.package_path,
       1 - CASE WHEN t.distance = 'NaN'::float8 THEN 1 ELSE t.distance END AS score,
       ch.text, NULLIF(ch.metadata, '{{}}'::jsonb), {embedding}
FROM (
    SELECT e.family, e.chunk_id, e.package_path, e.content_sha256, e.embedding,
           e.embedding <=> %(q)s::{vtype} AS distance
    FROM ragstore.{table} AS e
    {where}
    ORDER BY e.embedding <=> %(q)s::{vtype}
    LIMIT {k}
) AS t
JOIN ragstore.chunks AS ch
  ON ch.family = t.family AND ch.chunk_id = t.chunk_id AND ch.content_sha256 = t.content_sha256
ORDER BY score DESC, t.chunk_id

-- name: exact_subset
SELECT t.chunk_id, t.package_path, t.score, ch.text, NULLIF(ch.metadata, '{{}}'::jsonb), {embedding}
FROM (
    SELECT e.family, e.chunk_id, e.package_path, e.content_sha256, e.embedding,
           1 - CASE WHEN (e.embedding <=> %(q)s::{vtype}) = 'NaN'::float8 THEN 1
                    ELSE (e.embedding <=> %(q)s::{vtype}) END AS score
    FROM ragstore.{table} AS e
    {where}
    ORDER BY score DESC, e.chunk_id
    LIMIT {k}
) AS t
JOIN ragstore.chunks AS ch
  ON ch.family = t.family AND ch.chunk_id = t.chunk_id AND ch.content_sha256 = t.content_sha256
ORDER BY t.score DESC, t.chunk_id

-- name: zero_query
SELECT t.chunk_id, t.package_path, 0::float8 AS score, ch.text, ch.metadata, t.embedding
FROM (
    SELECT e.family, e.chunk_id, e.package_path, e.content_sha256, e.embedding
    FROM ragstore.{table} AS e
    {where}
    ORDER BY e.chunk_id
    LIMIT {k}
) AS t
JOIN ragstore.chunks AS ch
  ON ch.family = t.family AND ch.chunk_id = t.chunk_id AND ch.content_sha256 = t.content_sha256
ORDER BY t.chunk_id

-- name: stream_vectors
-- The exact path: every row passing the filter, its vector in its binary form, read through a
-- server-side cursor in batches.
SELECT e.chunk_id, {send}(e.embedding)
FROM ragstore.{table} AS e
{where}
