-- The read path on Citus: the parts of search.sql that Citus cannot plan as written, in a form it pushes
-- to every shard. Same parameters, same columns, same order (score DESC, chunk_id ASC).
-- - hnsw: no settings subquery (the settings placeholder of search.sql's hnsw block is empty here):
--   Citus plans a LIMIT subquery laterally joined to another subquery only on the coordinator ("cannot
--   push down this subquery"); the HNSW settings are SET LOCAL and propagated to the workers instead
--   (ragstore.search.vector). The inner ORDER BY ... LIMIT runs on each shard's HNSW index; the
--   coordinator merges the shards' top k and joins the k rows to their chunks.
-- - exact_subset: the distance is an expression (the exact_subset_distance block below), not a LATERAL
--   subquery (the lateral placeholder of search.sql's exact_subset block is empty here).
-- - The exact path's stream reads rows, not heap-page ranges (a ctid means nothing across shards).

-- name: exact_subset_distance
(e.embedding <=> %(q)s::{vtype})

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
