-- Full text and hybrid search, read by ragstore.search.fts and ragstore.search.hybrid.
--
-- Placeholders filled through psycopg.sql, never with user text: {table} (the family table, an
-- Identifier), {vtype} (vector(<dim>) or halfvec(<dim>), checked), {query_terms} (the block below),
-- {join} (the join to chunks a metadata filter needs) and {where_fts} / {where_vec} (Filter.where of
-- ragstore.search.filters over the family table "e" and chunks "c": the package/metadata filter ANDed
-- with "c.tsv @@ m.wide" for the full-text leg and with "%(use_vector)s" for the vector leg).
--
-- A family serves its own chunks only: chunks are read with c.family = %(family)s, joined to the family
-- table on (family, chunk_id) and on equal content_sha256 (the vector is the embedding of the text).
--
-- Parameters: family (the family's name), query (text), fts_config (regconfig name), any (true: a plain-words query also matches
-- chunks holding only some of its words, chunks holding all of them ranked first), norm (ts_rank_cd
-- normalisation flags), fts_n / vec_n (top-N per leg), q (the query vector), use_vector (false for a
-- zero-magnitude query: the vector leg is empty), w_fts / w_vec (RRF leg weights), rrf_k, k.

-- name: query_terms
-- The CTEs both blocks start with ({query_terms}): q, the query as a strict tsquery; terms, each distinct
-- word (lexeme) of the query with its inverse document frequency over the family's chunks; m, the tsquery a
-- chunk must match (strict, or any of the words when the "any" parameter is true).
q AS MATERIALIZED (
    SELECT websearch_to_tsquery(%(fts_config)s::regconfig, %(query)s) AS strict
),
-- each distinct word (lexeme) of the query, with its inverse document frequency over the family's chunks
terms AS MATERIALIZED (
    SELECT l.tq, ln(1.0 + (n.n - l.df + 0.5) / (l.df + 0.5)) AS idf
    FROM (
        SELECT x.tq, (SELECT count(*) FROM ragstore.chunks AS d WHERE d.family = %(family)s AND d.tsv @@ x.tq) AS df
        FROM (
            SELECT DISTINCT ('''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''')::tsquery AS tq
            FROM unnest(tsvector_to_array(to_tsvector(%(fts_config)s::regconfig, %(query)s))) AS lexeme
        ) AS x
    ) AS l
    CROSS JOIN (SELECT greatest(count(*), 1)::float8 AS n FROM ragstore.chunks AS d WHERE d.family = %(family)s) AS n
),
m AS MATERIALIZED (
    SELECT q.strict,
           CASE WHEN %(any)s
                THEN coalesce((SELECT string_agg(t.tq::text, ' | ') FROM terms AS t), '')::tsquery
                ELSE q.strict END AS wide
    FROM q
)

-- name: fts
-- The full-text leg alone: chunks of the family matching the query, best first. A chunk's score is
-- Σ over the query's words of idf(word) · (1 + cd/(cd + 1)) where cd = ts_rank_cd of the chunk for that
-- word alone, > 0 exactly when the chunk holds the word (tsv keeps positions): rare words count more, and
-- more (denser) occurrences add a bounded bonus. One ts_rank_cd call per (chunk, word).
WITH {query_terms},
fts AS (
    SELECT c.chunk_id, coalesce((SELECT sum(t.idf * CASE WHEN r.cd > 0 THEN 1.0 + r.cd / (r.cd + 1.0) ELSE 0.0 END)
            FROM terms AS t CROSS JOIN LATERAL (SELECT ts_rank_cd(c.tsv, t.tq, %(norm)s)::float8 AS cd) AS r), 0.0) AS score
    FROM m
    CROSS JOIN ragstore.chunks AS c
    JOIN ragstore.{table} AS e
      ON e.family = c.family AND e.chunk_id = c.chunk_id AND e.content_sha256 = c.content_sha256
    {where_fts}
    ORDER BY score DESC, c.chunk_id
    LIMIT %(k)s
)
SELECT f.chunk_id, c.package_path, f.score, c.text, c.metadata, e.embedding, c.created_at,
       row_number() OVER (ORDER BY f.score DESC, f.chunk_id) AS fts_rank
FROM fts AS f
JOIN ragstore.{table} AS e ON e.chunk_id = f.chunk_id
JOIN ragstore.chunks AS c
  ON c.family = e.family AND c.chunk_id = e.chunk_id AND c.content_sha256 = e.content_sha256
ORDER BY fts_rank;

-- name: hybrid
-- Both legs, each top-N, fused by Reciprocal Rank Fusion: score = Σ w_leg / (rrf_k + rank_leg), 1-based
-- ranks; a chunk one leg missed gets null rank and score for that leg. Ordered by fused score, then id.
WITH {query_terms},
fts_top AS MATERIALIZED (
    SELECT c.chunk_id, coalesce((SELECT sum(t.idf * CASE WHEN r.cd > 0 THEN 1.0 + r.cd / (r.cd + 1.0) ELSE 0.0 END)
            FROM terms AS t CROSS JOIN LATERAL (SELECT ts_rank_cd(c.tsv, t.tq, %(norm)s)::float8 AS cd) AS r), 0.0) AS score
    FROM m
    CROSS JOIN ragstore.chunks AS c
    JOIN ragstore.{table} AS e
      ON e.family = c.family AND e.chunk_id = c.chunk_id AND e.content_sha256 = c.content_sha256
    {where_fts}
    ORDER BY score DESC, c.chunk_id
    LIMIT %(fts_n)s
),
fts AS (
    SELECT chunk_id, score, row_number() OVER (ORDER BY score DESC, chunk_id) AS rank
    FROM fts_top
),
-- MATERIALIZED, then re-ranked: with iterative index scans (filtered queries) pgvector may return rows
-- slightly out of order, so the rank comes from the exact distance, not from the scan order.
vec_top AS MATERIALIZED (
    SELECT e.chunk_id, (e.embedding <=> %(q)s::{vtype})::float8 AS distance
    FROM ragstore.{table} AS e
    {join}
    {where_vec}
    ORDER BY e.embedding <=> %(q)s::{vtype}
    LIMIT %(vec_n)s
),
vec AS (
    SELECT chunk_id, 1.0::float8 - distance AS score, row_number() OVER (ORDER BY distance, chunk_id) AS rank
    FROM vec_top
),
fused AS (
    SELECT coalesce(f.chunk_id, v.chunk_id) AS chunk_id,
           coalesce(%(w_fts)s::float8 / (%(rrf_k)s::int + f.rank), 0.0::float8)
             + coalesce(%(w_vec)s::float8 / (%(rrf_k)s::int + v.rank), 0.0::float8) AS score,
           f.rank AS fts_rank, f.score AS fts_score, v.rank AS vector_rank, v.score AS vector_score
    FROM fts AS f
    FULL OUTER JOIN vec AS v ON v.chunk_id = f.chunk_id
    ORDER BY score DESC, chunk_id
    LIMIT %(k)s
)
SELECT u.chunk_id, c.package_path, u.score, c.text, c.metadata, e.embedding, c.created_at,
       u.fts_rank, u.fts_score, u.vector_rank, u.vector_score,
       CASE WHEN %(use_vector)s
            THEN coalesce(nullif(1.0::float8 - (e.embedding <=> %(q)s::{vtype}), 'NaN'::float8), 0.0::float8)
            ELSE 0.0::float8 END AS cosine,
       coalesce(u.fts_score, (SELECT sum(t.idf * CASE WHEN r.cd > 0 THEN 1.0 + r.cd / (r.cd + 1.0) ELSE 0.0 END)
                     FROM terms AS t CROSS JOIN LATERAL (SELECT ts_rank_cd(c.tsv, t.tq, %(norm)s)::float8 AS cd) AS r), 0.0) AS lexical
FROM fused AS u
JOIN ragstore.{table} AS e ON e.chunk_id = u.chunk_id
JOIN ragstore.chunks AS c
  ON c.family = e.family AND c.chunk_id = e.chunk_id AND c.content_sha256 = e.content_sha256
ORDER BY u.score DESC, u.chunk_id;
