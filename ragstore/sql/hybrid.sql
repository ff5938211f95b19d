-- Full text and hybrid search, read by ragstore.search.fts and ragstore.search.hybrid.
--
-- Placeholders filled through psycopg.sql, never with user text: {table} (the family table, an
-- Identifier), {vtype} (vector(<dim>) or halfvec(<dim>), checked), {query_terms} (the block below)
-- and {where_fts} / {where_vec} (Filter.where of ragstore.search.filters over the family table "e",
-- which holds the metadata too: the package/metadata filter ANDed
-- with "c.tsv @@ m.wide" for the full-text leg and with "%(use_vector)s" for the vector leg).
--
-- A family serves its own chunks only: chunks are read with c.family = %(family)s, joined to the family
-- table on (family, chunk_id) and on equal content_sha256 (the vector is the embedding of the text).
--
-- Parameters: family (the family's name), query (text), fts_config (regconfig name), any (true: a plain-words query also matches
-- chunks holding only some of its words, chunks holding all of them ranked first), norm (ts_rank_cd
-- normalisation flags), fts_n / vec_n (top-N per leg), q (the query vector), use_vector (false for a
-- zero-magnitude query: the vector leg is empty), fusion ('rrf' or 'cc'), w_fts / w_vec (RRF leg
-- weights), rrf_k, norm_kind ('minmax', 'zscore' or 'tmm') and alpha (the dense weight of 'cc'), k.

-- name: query_terms
-- The CTEs both blocks start with ({query_terms}): q, the query as a strict tsquery; terms, each distinct
-- word (lexeme) of the query with its inverse document frequency over the family's chunks (N, the family's
-- chunk count, is the sum of its rows in ragstore.family_chunk_deltas, kept by triggers on the chunks); m, the tsquery a
-- chunk must match (strict, or any of the words when the "any" parameter is true).
q AS MATERIALIZED (
    SELECT websearch_to_tsquery(%(fts_config)s::regconfig, %(query)s) AS strict
),
-- each distinct word (lexeme) of the query, with its inverse document frequency over the family's chunks
-- (df is MATERIALIZED on its own: the idf formula reads it twice, and inlined it was counted twice)
dfs AS MATERIALIZED (
    SELECT x.tq, (SELECT count(*) FROM ragstore.chunks AS d WHERE d.family = %(family)s AND d.tsv @@ x.tq) AS df
    FROM (
        SELECT DISTINCT ('''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''')::tsquery AS tq
        FROM unnest(tsvector_to_array(to_tsvector(%(fts_config)s::regconfig, %(query)s))) AS lexeme
    ) AS x
),
terms AS MATERIALIZED (
    SELECT l.tq, ln(1.0 + (n.n - l.df + 0.5) / (l.df + 0.5)) AS idf
    FROM dfs AS l
    CROSS JOIN (SELECT greatest(coalesce(sum(d.delta), 0), 1)::float8 AS n
                FROM ragstore.family_chunk_deltas AS d WHERE d.family = %(family)s) AS n
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
-- Both legs, each top-N (fts_n, vec_n; ranks 1-based), then fused. Every candidate (the union of the two
-- lists) gets BOTH leg scores: its cosine to the query (computed when the vector leg missed it) and its
-- full-text score (computed when the full-text leg missed it, 0 when it holds none of the words).
-- fusion = 'rrf': score = Σ w_leg / (rrf_k + rank_leg) over the legs that found it.
-- fusion = 'cc' (convex combination): score = alpha · norm(cosine) + (1 − alpha) · norm(full text), where
-- norm uses each leg's own top-N list: 'minmax' (x − min) / (max − min); 'zscore' (x − mean) / stddev;
-- 'tmm' (theoretical min-max) (x − lo) / (max − lo) with lo the score's floor (−1 for cosine, 0 for
-- full text). An empty leg (no word matched, a zero query vector) adds 0; a degenerate spread
-- (max = min, stddev 0) gives 1 to the leg's best and 0 below it (minmax) or 0 (zscore).
-- The chunk_id breaks ties. ranks and scores of a leg that missed the chunk are null.
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
fts AS MATERIALIZED (
    SELECT chunk_id, score, row_number() OVER (ORDER BY score DESC, chunk_id) AS rank
    FROM fts_top
),
-- MATERIALIZED, then re-ranked: with iterative index scans (filtered queries) pgvector may return rows
-- slightly out of order, so the rank comes from the exact distance, not from the scan order.
vec_top AS MATERIALIZED (
    SELECT e.chunk_id, (e.embedding <=> %(q)s::{vtype})::float8 AS distance
    FROM ragstore.{table} AS e
    {where_vec}
    ORDER BY e.embedding <=> %(q)s::{vtype}
    LIMIT %(vec_n)s
),
vec AS MATERIALIZED (
    SELECT chunk_id, 1.0::float8 - distance AS score, row_number() OVER (ORDER BY distance, chunk_id) AS rank
    FROM vec_top
),
stats AS MATERIALIZED (
    SELECT f.lo AS f_min, f.hi AS f_max, f.mean AS f_mean, f.sd AS f_sd,
           v.lo AS v_min, v.hi AS v_max, v.mean AS v_mean, v.sd AS v_sd
    FROM (SELECT min(score) AS lo, max(score) AS hi, avg(score) AS mean, stddev_pop(score) AS sd FROM fts) AS f
    CROSS JOIN (SELECT min(score) AS lo, max(score) AS hi, avg(score) AS mean, stddev_pop(score) AS sd FROM vec) AS v
),
pool AS MATERIALIZED (
    SELECT coalesce(f.chunk_id, v.chunk_id) AS chunk_id,
           f.rank AS fts_rank, f.score AS fts_score, v.rank AS vector_rank, v.score AS vector_score
    FROM fts AS f
    FULL OUTER JOIN vec AS v ON v.chunk_id = f.chunk_id
),
filled AS MATERIALIZED (
    SELECT p.*, c.package_path, c.text, c.metadata, e.embedding, c.created_at,
           coalesce(p.vector_score, CASE WHEN %(use_vector)s
                THEN coalesce(nullif(1.0::float8 - (e.embedding <=> %(q)s::{vtype}), 'NaN'::float8), 0.0::float8)
                ELSE 0.0::float8 END) AS cosine,
           coalesce(p.fts_score, (SELECT sum(t.idf * CASE WHEN r.cd > 0 THEN 1.0 + r.cd / (r.cd + 1.0) ELSE 0.0 END)
                FROM terms AS t CROSS JOIN LATERAL (SELECT ts_rank_cd(c.tsv, t.tq, %(norm)s)::float8 AS cd) AS r), 0.0)
             AS lexical
    FROM pool AS p
    JOIN ragstore.{table} AS e ON e.chunk_id = p.chunk_id
    JOIN ragstore.chunks AS c
      ON c.family = e.family AND c.chunk_id = e.chunk_id AND c.content_sha256 = e.content_sha256
),
normed AS (
    SELECT x.*,
           CASE %(norm_kind)s
               WHEN 'minmax' THEN coalesce((x.cosine - s.v_min) / nullif(s.v_max - s.v_min, 0.0),
                                           CASE WHEN x.cosine >= s.v_max THEN 1.0 ELSE 0.0 END)
               WHEN 'zscore' THEN coalesce((x.cosine - s.v_mean) / nullif(s.v_sd, 0.0), 0.0)
               ELSE coalesce((x.cosine + 1.0) / nullif(s.v_max + 1.0, 0.0), 0.0)
           END::float8 AS v_norm,
           CASE %(norm_kind)s
               WHEN 'minmax' THEN coalesce((x.lexical - s.f_min) / nullif(s.f_max - s.f_min, 0.0),
                                           CASE WHEN x.lexical >= s.f_max THEN 1.0 ELSE 0.0 END)
               WHEN 'zscore' THEN coalesce((x.lexical - s.f_mean) / nullif(s.f_sd, 0.0), 0.0)
               ELSE coalesce(x.lexical / nullif(s.f_max, 0.0), 0.0)
           END::float8 AS f_norm
    FROM filled AS x
    CROSS JOIN stats AS s
),
fused AS (
    SELECT n.*,
           CASE WHEN %(fusion)s = 'rrf'
                THEN coalesce(%(w_fts)s::float8 / (%(rrf_k)s::int + n.fts_rank), 0.0::float8)
                     + coalesce(%(w_vec)s::float8 / (%(rrf_k)s::int + n.vector_rank), 0.0::float8)
                ELSE %(alpha)s::float8 * n.v_norm + (1.0::float8 - %(alpha)s::float8) * n.f_norm
           END AS score
    FROM normed AS n
)
SELECT u.chunk_id, u.package_path, u.score, u.text, u.metadata, u.embedding, u.created_at,
       u.fts_rank, u.fts_score, u.vector_rank, u.vector_score, u.cosine, u.lexical
FROM fused AS u
ORDER BY u.score DESC, u.chunk_id
LIMIT %(k)s;

-- name: store_fusion
-- A family's fusion settings (ragstore family tune): option "fusion" set to a JSON object, or removed
-- when the parameter is null (back to the default). Returns the family's name, none when it does not exist.
UPDATE ragstore.families
SET options = CASE WHEN %(fusion)s::jsonb IS NULL THEN options - 'fusion'
                   ELSE options || jsonb_build_object('fusion', %(fusion)s::jsonb) END
WHERE name = %(family)s
RETURNING name;
