-- The read path (ragstore search). {table} is a family table and {vtype} its checked column type
-- (vector(16), halfvec(1024)); {where} comes from ragstore.search.request.Filter, values are
-- always parameters. Score is cosine similarity 1 - (a <=> b); pgvector returns NaN for a zero vector,
-- which scores 0 (cosine undefined, 0 is the neutral "orthogonal"). Every block returns
-- chunk_id, package_path, score, text, metadata, embedding ordered by score DESC, chunk_id ASC.
-- A family serves its own chunks only: every join to ragstore.chunks is on (family, chunk_id), and also
-- requires the row's content_sha256 to be the chunk's, so a vector is never served with a text it is not
-- the embedding of (ragstore's writer keeps them equal; a row written behind its back is left out).

-- name: hnsw
-- ONE statement: the HNSW settings, then the index scan, then the text of only the k rows found. On one
-- node the settings placeholder after FROM is the hnsw_settings block below: a subquery s that sets
-- hnsw.ef_search / hnsw.iterative_scan with set_config(..., is_local => true); the LATERAL scan references
-- s, so the settings are in place before the index is read. On Citus that placeholder is empty
-- (ragstore/sql/search_citus.sql says why) and the settings are SET LOCAL before the statement. The inner ORDER BY ... LIMIT
-- is what the HNSW index serves; the outer ORDER BY re-sorts (relaxed_order iterative scans return rows
-- slightly out of order) and breaks ties by chunk_id. chunks is joined to those k rows only (no query per
-- hit). There is no check of ragstore.families here (it cost a probe per query): a cached Family whose
-- table was swapped by a model migration fails with UndefinedTable, and a changed dimension with a
-- DataError, and the caller re-reads the family and runs again (ragstore.search.api).
-- Empty metadata comes back as NULL (read as an empty dict without a JSON parse per hit).
-- {embedding} is t.embedding when the caller wants the vectors (MMR), else NULL (less to send and decode).
-- {k} is a literal, not a parameter: with LIMIT $n the generic plan is costed for a tenth of the table, so
-- Postgres re-plans every execution of the prepared statement (measured: +0.2 ms, more than the scan).
-- {order} is the distance the family's HNSW index serves (ragstore.families.storage.order_expression: the
-- column, its halfvec cast or its binary code) and {candidates} how many rows it reads: k, or k × the
-- family's rerank factor for the bit storage, whose candidates the outer ORDER BY re-ranks exactly by the
-- full vectors' cosine (t.distance) before the outer LIMIT keeps k.
SELECT t.chunk_id, t.package_path,
       1 - CASE WHEN t.distance = 'NaN'::float8 THEN 1 ELSE t.distance END AS score,
       ch.text, NULLIF(ch.metadata, '{{}}'::jsonb), {embedding}
FROM {settings}(
    SELECT e.family, e.chunk_id, e.package_path, e.content_sha256, e.embedding,
           e.embedding <=> %(q)s::{vtype} AS distance
    FROM ragstore.{table} AS e
    {where}
    ORDER BY {order}
    LIMIT {candidates}
) AS t
JOIN ragstore.chunks AS ch
  ON ch.family = t.family AND ch.chunk_id = t.chunk_id AND ch.content_sha256 = t.content_sha256
ORDER BY score DESC, t.chunk_id
LIMIT {k}

-- name: hnsw_settings
(
    SELECT set_config('hnsw.ef_search', %(ragstore_ef)s, true)
           || set_config('hnsw.iterative_scan', %(ragstore_iterative)s, true) AS settings
) AS s
CROSS JOIN LATERAL

-- name: exact_subset
-- Exact top-k over the rows a selective filter keeps, read through the package_path btree (a bitmap scan)
-- or the metadata GIN index. The sort key is the computed score, which the HNSW index cannot serve, so
-- the planner never walks the graph here. On one node the distance is computed once per row: the lateral
-- placeholder is the exact_subset_lateral block below and the distance placeholder its column; on Citus
-- the lateral one is empty and the distance one the expression itself (ragstore/sql/search_citus.sql). A top-N heapsort keeps k. (A
-- MATERIALIZED subset CTE, measured: 2x slower at 10,000 rows of 384-d.)
-- {k} is a literal and {embedding} t.embedding or NULL, as in the hnsw block.
SELECT t.chunk_id, t.package_path, t.score, ch.text, NULLIF(ch.metadata, '{{}}'::jsonb), {embedding}
FROM (
    SELECT e.family, e.chunk_id, e.package_path, e.content_sha256, e.embedding,
           1 - CASE WHEN {distance} = 'NaN'::float8 THEN 1 ELSE {distance} END AS score
    FROM ragstore.{table} AS e
    {lateral}
    {where}
    ORDER BY score DESC, e.chunk_id
    LIMIT {k}
) AS t
JOIN ragstore.chunks AS ch
  ON ch.family = t.family AND ch.chunk_id = t.chunk_id AND ch.content_sha256 = t.content_sha256
ORDER BY t.score DESC, t.chunk_id

-- name: exact_subset_lateral
CROSS JOIN LATERAL (SELECT e.embedding <=> %(q)s::{vtype} AS distance) AS d

-- name: exact_subset_distance
d.distance

-- name: zero_query
-- A zero-magnitude query scores 0 against every row: the first k rows by chunk_id ({k} a literal).
WITH top AS (
    SELECT e.family, e.chunk_id, e.package_path, e.content_sha256, e.embedding
    FROM ragstore.{table} AS e
    {where}
    ORDER BY e.chunk_id
    LIMIT {k}
)
SELECT t.chunk_id, t.package_path, 0::float8 AS score, ch.text, ch.metadata, t.embedding
FROM top AS t
JOIN ragstore.chunks AS ch
  ON ch.family = t.family AND ch.chunk_id = t.chunk_id AND ch.content_sha256 = t.content_sha256
ORDER BY t.chunk_id

-- name: stream_vectors
-- The numpy exact path: the family in batches of %(step)s heap pages, one row per batch, read through a
-- server-side cursor (one statement, so one snapshot, and the server holds one batch at a time). Each
-- batch is a TID range scan; its rows come as an array of chunk_ids and ONE bytea concatenating their
-- {send} values (int16 dim, int16 unused, then big-endian float32/float16 values), which numpy reads
-- without a step per row. Pages past the relation size computed here hold no row of this snapshot.
SELECT b.ids, b.vectors
FROM (SELECT pg_relation_size(%(relation)s::regclass) / current_setting('block_size')::int AS pages) AS r,
     generate_series(0, r.pages, %(step)s) AS g(first_page)
CROSS JOIN LATERAL (
    SELECT array_agg(e.chunk_id) AS ids, string_agg({send}(e.embedding), ''::bytea) AS vectors
    FROM ragstore.{table} AS e
    {where}
) AS b
WHERE b.ids IS NOT NULL

-- name: hits_by_ids
-- Text, metadata and vectors of the exact path's top k, in one statement (a row failing the content
-- check is left out here: the streamed scan reads the family table alone).
SELECT e.chunk_id, e.package_path, ch.text, ch.metadata, e.embedding
FROM ragstore.{table} AS e
JOIN ragstore.chunks AS ch
  ON ch.family = e.family AND ch.chunk_id = e.chunk_id AND ch.content_sha256 = e.content_sha256
WHERE e.chunk_id = ANY (%(ids)s::text[])

-- name: sample_vectors
-- check-recall: a seeded, repeatable sample of stored vectors (of the filtered rows when filtered).
SELECT e.embedding
FROM ragstore.{table} AS e
{where}
ORDER BY md5(e.chunk_id || %(seed)s::text), e.chunk_id
LIMIT %(n)s

-- name: may_record_recall
-- check-recall records its figure only for a role that may update the registry (the owner side).
SELECT has_table_privilege('ragstore.families', 'UPDATE')

-- name: record_recall
-- check-recall: the last recall measured, as family option "recall" (with the time of the measurement),
-- written only while the family still serves the table and the storage it measured (a migration meanwhile
-- made the figure stale). Returns the family's name, none when nothing was written.
UPDATE ragstore.families
SET options = options || jsonb_build_object('recall', %(recall)s::jsonb || jsonb_build_object(
    'measured_at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')))
WHERE name = %(name)s AND table_name = %(table)s AND state = 'ready'
  AND options -> 'storage' IS NOT DISTINCT FROM %(storage)s::jsonb
  AND options -> 'rerank_factor' IS NOT DISTINCT FROM %(rerank_factor)s::jsonb
RETURNING name
