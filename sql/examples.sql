-- psql examples for SQL users of ragstore (functions from migration 0002, text in sql/search.sql).
-- Run with:  psql "$RAGSTORE_DSN" -f sql/examples.sql   (or paste the statements one by one).
-- They use the family 'docs' of the README's quick start (examples/sample.jsonl: 300 chunks of man pages).
-- Every statement only reads; the role ragstore_reader (migration 0004) may run all of them.

-- Which families exist, their model, dimension and table.
SELECT name, backend, model, dim, vector_type, table_name, state FROM ragstore.families ORDER BY name;

-- Full text of a query for an offline family: the query is embedded in SQL by ragstore.offline_embed.
-- Returns chunk_id, package_path, score (cosine similarity, 0 for a zero vector), text;
-- ordered by score descending, then chunk_id.
SELECT chunk_id, package_path, round(score::numeric, 4) AS score, left(text, 60) AS text
FROM ragstore.search_text('docs', 'how do I copy files and directories', 5);

-- Any family with a vector you computed yourself (same model and dimension as the family, else an error).
-- Here: the offline embedding of a text, to show the shape; an application passes its own vector.
SELECT chunk_id, round(score::numeric, 4) AS score
FROM ragstore.search('docs', ragstore.offline_embed('copy files'), 10);

-- "More like this": the stored vector of one chunk as the query.
SELECT s.chunk_id, round(s.score::numeric, 4) AS score
FROM ragstore.emb_docs AS e, ragstore.search('docs', e.embedding, 6) AS s
WHERE e.chunk_id = 'man1/cp.1#0' AND s.chunk_id <> e.chunk_id;

-- Citations in the form a model is asked to quote: [package_path#chunk_id].
SELECT format('[%s#%s]', package_path, chunk_id) AS citation, left(text, 80) AS text
FROM ragstore.search_text('docs', 'copy files', 3);

-- A package filter and metadata: the functions search the whole family; filter a wider top k in SQL,
-- or use `ragstore search --package ... --where ...`, which plans filtered queries itself. With metadata
-- on your chunks, add a condition such as AND c.metadata @> '{"lang": "en"}'.
SELECT s.chunk_id, round(s.score::numeric, 4) AS score, c.metadata
FROM ragstore.search_text('docs', 'copy files', 100) AS s
JOIN ragstore.chunks AS c ON c.family = 'docs' AND c.chunk_id = s.chunk_id
WHERE s.package_path LIKE 'man1/c%'
ORDER BY s.score DESC, s.chunk_id
LIMIT 5;

-- The search uses the family's HNSW index; ragstore.search sets hnsw.ef_search to greatest(k, 100) for
-- its own call only. For a one-off wider search in a session of your own:
BEGIN;
SET LOCAL hnsw.ef_search = 200;
SELECT chunk_id, round(score::numeric, 4) AS score FROM ragstore.search_text('docs', 'copy files', 10);
ROLLBACK;

-- Errors are plain and name the problem:
--   SELECT * FROM ragstore.search('nope', '[1,2,3]'::vector, 5);
--     ERROR:  ragstore.search: no family named 'nope' (see SELECT name FROM ragstore.families)
--   SELECT * FROM ragstore.search('docs', '[1,2,3]'::vector, 5);
--     ERROR:  ragstore.search: the query has 3 dimensions, family 'docs' holds 16-d vectors
--   SELECT * FROM ragstore.search_text('minilm_docs', 'keys', 5);
--     ERROR:  ragstore.search_text: family 'minilm_docs' uses the minilm backend, which SQL cannot run; ...
