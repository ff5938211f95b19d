-- psql examples for SQL users of ragstore. The functions are defined once each, in
-- ragstore/sql/functions/<name>.sql (ragstore.search in search.sql, and so on); the tables in
-- ragstore/sql/schema.sql. sql/memory.sql has the examples of agent memory.
-- Run with:  psql "$RAGSTORE_DSN" -f sql/examples.sql   (or paste the statements one by one).
-- They use the family 'docs' of the README's quick start (examples/sample.jsonl: 300 chunks of man pages).
-- Every statement only reads; the role ragstore_reader may run all of them. Each family has a stable SQL
-- name, the view ragstore.vectors_<family> (chunk_id, package_path, text, metadata, embedding, model): it
-- survives `ragstore family migrate` (a model change moves the vectors to a new table; the view follows).

-- The family's default search, the one `ragstore search docs "..."` runs (ragstore/sql/functions/search_auto.sql):
-- full text for an offline family like 'docs'; for a semantic family pass the query's vector as well, embedded
-- by the application with the family's model (SQL cannot run MiniLM):
--   SELECT * FROM ragstore.search_auto('man_minilm', 'copy files and directories', $1::vector, 10);
SELECT chunk_id, round(score::numeric, 4) AS score, left(text, 60) AS text
FROM ragstore.search_auto('docs', 'copy files and directories', NULL, 5);

-- Which families exist, their model, dimension and table.
SELECT name, backend, model, dim, vector_type, table_name, state FROM ragstore.families ORDER BY name;

-- The offline fingerprint's cosine (a lexical hash, not a semantic model): the query is embedded in SQL by
-- ragstore.offline_embed.
-- Returns chunk_id, package_path, score (cosine similarity, 0 for a zero vector), text;
-- ordered by score descending, then chunk_id.
SELECT chunk_id, package_path, round(score::numeric, 4) AS score, left(text, 60) AS text
FROM ragstore.search_text('docs', 'how do I copy files and directories', 5);

-- Any family with a vector you computed yourself (same model and dimension as the family, else an error).
-- Here: the offline embedding of a text, to show the shape; an application passes its own vector.
SELECT chunk_id, round(score::numeric, 4) AS score
FROM ragstore.search('docs', ragstore.offline_embed('copy files'), 10);

-- "More like this": the stored vector of one chunk as the query, read through the family's view.
SELECT s.chunk_id, round(s.score::numeric, 4) AS score
FROM ragstore.vectors_docs AS v, ragstore.search('docs', v.embedding, 6) AS s
WHERE v.chunk_id = 'man1/cp.1#0' AND s.chunk_id <> v.chunk_id;

-- The view holds every chunk of the family with its text, metadata and vector.
SELECT chunk_id, package_path, vector_dims(embedding) AS dims, model, left(text, 40) AS text
FROM ragstore.vectors_docs ORDER BY chunk_id LIMIT 3;

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

-- Full text and hybrid (ragstore/sql/functions/fts_search.sql, hybrid_search.sql, search_auto.sql).
-- ragstore.search_auto(family, query_text, query_vector, k) runs the family's DEFAULT mode, the one
-- `ragstore search` runs: full text for an offline family, hybrid for a semantic family (the query text
-- and its vector, embedded by the application with the family's model), HNSW for a bare vector.
-- Hybrid: each leg takes its top N chunks of the family (N = the family's per_leg, 20 by default): the
-- full-text leg matches websearch_to_tsquery of the query (quotes, "or" and -exclusions work; a query of
-- plain words matches chunks holding any of them) ranked by BM25 (k1 1.2, b 0.75) from the postings in
-- ragstore.chunk_terms and the family's chunk count and total length (ragstore.family_chunk_deltas); the
-- vector leg orders by cosine distance on the family's HNSW index. The legs are fused by the family's
-- stored settings (`ragstore family tune`; `ragstore family show` prints them): by default a convex
-- combination 0.8 * (cosine + 1)/(best cosine + 1) + 0.2 * full-text score / best full-text score, the
-- bests over each leg's list; or RRF, 1/(rrf_k + rank) per leg. A chunk one leg missed shows that leg's
-- rank and score as NULL.
SELECT chunk_id, round(score::numeric, 4) AS score, fts_rank, vector_rank
FROM ragstore.hybrid_search('docs', 'copy files "preserve mode" -remote', ragstore.offline_embed('copy files'), 10);
