-- The read path (ragstore search). {table} is a family table and {vtype} its checked column type
-- (vector(16), halfvec(1024)); {join} and {where} come from ragstore.search.filters.Filter, values are
-- always parameters. Score is cosine similarity 1 - (a <=> b); pgvector returns NaN for a zero vector,
-- which scores 0 (cosine undefined, 0 is the neutral "orthogonal"). Every block returns
-- chunk_id, package_path, score, text, metadata, embedding ordered by score DESC, chunk_id ASC.

-- name: hnsw
-- The inner ORDER BY ... LIMIT is what the HNSW index serves; the outer ORDER BY re-sorts (relaxed_order
-- iterative scans return rows slightly out of order) and breaks ties by chunk_id. Text and metadata
-- come from the same statement (no query per hit).
WITH top AS MATERIALIZED (
    SELECT e.chunk_id, e.package_path, e.embedding, e.embedding <=> %(q)s::{vtype} AS distance
    FROM ragstore.{table} AS e {join}
    {where}
    ORDER BY e.embedding <=> %(q)s::{vtype}
    LIMIT %(k)s
), scored AS (
    SELECT t.*, 1 - CASE WHEN t.distance = 'NaN'::float8 THEN 1 ELSE t.distance END AS score FROM top AS t
)
SELECT s.chunk_id, s.package_path, s.score, ch.text, ch.metadata, s.embedding
FROM scored AS s JOIN ragstore.chunks AS ch ON ch.chunk_id = s.chunk_id
ORDER BY s.score DESC, s.chunk_id

-- name: exact_subset
-- Exact top-k over the rows a selective filter keeps: the MATERIALIZED subset is read through the
-- package_path btree (or the metadata GIN index), never through the HNSW graph.
WITH subset AS MATERIALIZED (
    SELECT e.chunk_id, e.package_path, e.embedding
    FROM ragstore.{table} AS e {join}
    {where}
), scored AS (
    SELECT s.*, 1 - CASE WHEN d.distance = 'NaN'::float8 THEN 1 ELSE d.distance END AS score
    FROM subset AS s, LATERAL (SELECT s.embedding <=> %(q)s::{vtype} AS distance) AS d
), top AS (
    SELECT * FROM scored ORDER BY score DESC, chunk_id LIMIT %(k)s
)
SELECT t.chunk_id, t.package_path, t.score, ch.text, ch.metadata, t.embedding
FROM top AS t JOIN ragstore.chunks AS ch ON ch.chunk_id = t.chunk_id
ORDER BY t.score DESC, t.chunk_id

-- name: zero_query
-- A zero-magnitude query scores 0 against every row: the first k rows by chunk_id.
WITH top AS (
    SELECT e.chunk_id, e.package_path, e.embedding
    FROM ragstore.{table} AS e {join}
    {where}
    ORDER BY e.chunk_id
    LIMIT %(k)s
)
SELECT t.chunk_id, t.package_path, 0::float8 AS score, ch.text, ch.metadata, t.embedding
FROM top AS t JOIN ragstore.chunks AS ch ON ch.chunk_id = t.chunk_id
ORDER BY t.chunk_id

-- name: stream_vectors
-- The numpy exact path reads the family through a server-side cursor, in batches.
SELECT e.chunk_id, e.embedding
FROM ragstore.{table} AS e {join}
{where}

-- name: hits_by_ids
-- Text, metadata and vectors of the exact path's top k, in one statement.
SELECT e.chunk_id, e.package_path, ch.text, ch.metadata, e.embedding
FROM ragstore.{table} AS e JOIN ragstore.chunks AS ch ON ch.chunk_id = e.chunk_id
WHERE e.chunk_id = ANY (%(ids)s::text[])

-- name: sample_vectors
-- check-recall: a seeded, repeatable sample of stored vectors (of the filtered rows when filtered).
SELECT e.embedding
FROM ragstore.{table} AS e {join}
{where}
ORDER BY md5(e.chunk_id || %(seed)s::text), e.chunk_id
LIMIT %(n)s
