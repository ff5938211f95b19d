-- Full text and hybrid search, read by ragstore.search.fts and ragstore.search.hybrid.
--
-- Placeholders filled through psycopg.sql, never with user text: {table} (the family table, an
-- Identifier), {vtype} (vector(<dim>) or halfvec(<dim>), checked), {query_terms}, {bm25}, {fts_top},
-- {hits}, {vec_top} and {vec_scan} (the blocks of those names; on Citus those of hybrid_citus.sql where it
-- has them), {candidates} (candidates_any for a query of plain words that matches chunks holding any of
-- its words, candidates_all for websearch_to_tsquery's strict meaning), {cosine} (the cosine block in the
-- hybrid statement, NULL in the full-text one), {norm} and {fuse} (the blocks norm_<normalization> and
-- fuse_<fusion> of the fusion settings), {hit_row} (the block hit_row_vector when the hits carry their
-- vector, else hit_row_plain; hybrid_citus.sql's hits take hit_vector: the vector or NULL), {guard} (the
-- guard block for a search on a remembered family, else nothing) and
-- {where_fts} / {where_vec} (Filter.where of ragstore.search.request over the family table "e",
-- which holds the metadata too: the package/metadata filter ANDed with the candidate's key for the
-- full-text leg and with "%(use_vector)s" for the vector leg).
--
-- A family serves its own chunks only: chunks are read with c.family = %(family)s, joined to the family
-- table on (family, chunk_id) and on equal content_sha256 (the vector is the embedding of the text).
--
-- {vec_order} (the distance the family's HNSW index serves, by its storage: ragstore.families.storage).
-- Literals (so that a prepared statement's generic plan is the plan its values need, and Postgres need
-- not plan every call): {fts_n} / {vec_n} (top-N per leg), {vec_candidates} (vec_n, or vec_n × the
-- rerank factor for the bit storage), {fts_head} (twice fts_n) and {k}.
-- Parameters: family (the family's name), query (text), fts_config (regconfig name), k1 and b (BM25's),
-- q (the query vector), use_vector (false for a zero-magnitude query: the vector leg is empty), w_fts /
-- w_vec (RRF leg weights), rrf_k, alpha (the dense weight of 'cc'), ragstore_ef / ragstore_iterative (the
-- HNSW settings); g_row in the guard.
-- Statements are sent without their comments (ragstore.db.sqlfiles.compact): psycopg remembers the
-- conversion of a statement's placeholders only for statements of at most 4,096 bytes.

-- name: query_terms
-- The CTEs both blocks start with. bm25 and fts_top: the blocks of those names, from this file on one
-- node, from hybrid_citus.sql on Citus (same columns, same scores); {candidates}: candidates_any for a
-- query of plain words ("any"), candidates_all otherwise.
{bm25},
{candidates},
{fts_top}

-- name: candidates_any
-- The full-text candidates of a query of plain words: every chunk holding one of them, best first (score
-- descending, then chunk_id). The first fts_head (twice fts_n) by a bounded sort (a top-N heap), the rest
-- by a second sort that runs only when the walk of fts_top needs more than them (the union's branches run
-- in order, the second only once the first is spent): walking ~1,500 candidates for 20 served ones need
-- not sort them all.
candidates AS (
    (SELECT b.chunk_id, b.score FROM bm25 AS b ORDER BY b.score DESC, b.chunk_id LIMIT {fts_head})
    UNION ALL
    (SELECT b.chunk_id, b.score FROM bm25 AS b ORDER BY b.score DESC, b.chunk_id OFFSET {fts_head})
)

-- name: candidates_all
-- The full-text candidates of websearch_to_tsquery's strict meaning: the chunks matching the query (q,
-- through the GIN index), scored by the same BM25 (0 when they hold none of the words, e.g. a query of
-- exclusions only), best first (one sort: a strict query matches few chunks).
q AS MATERIALIZED (
    SELECT websearch_to_tsquery(%(fts_config)s::regconfig, %(query)s) AS strict
),
candidates AS (
    SELECT c.chunk_id, coalesce(b.score, 0.0::float8) AS score
    FROM q
    JOIN ragstore.chunks AS c ON c.family = %(family)s AND c.tsv @@ q.strict
    LEFT JOIN bm25 AS b ON b.chunk_id = c.chunk_id
    ORDER BY score DESC, c.chunk_id
)

-- name: bm25
-- Every chunk of the family holding a word of the query with its BM25 score, from ragstore.fts_scores
-- (ragstore/sql/functions/fts_scores.sql): postings in ragstore.chunk_terms, N and the average length
-- from the family's ledger.
-- The score is rounded to 12 decimals: a sum's last bits depend on the order its terms are added in, so
-- two chunks of equal score could otherwise come back in either order (and in another on Citus); rounded,
-- the chunk_id breaks their tie everywhere. Rounded in float8 (round(x · 10^12) / 10^12, a correctly
-- rounded division, so the nearest float8 to the rounded decimal: the value numeric rounding gives) at a
-- fraction of the cost of a numeric round trip per chunk (two fifths of this block on ~1,000 chunks).
bm25 AS MATERIALIZED (
    SELECT s.chunk_id, round(s.score * 1e12::float8) / 1e12::float8 AS score
    FROM ragstore.fts_scores(%(family)s, %(fts_config)s::regconfig, %(query)s, %(k1)s, %(b)s) AS s
)

-- name: bm25_weights
-- BM25's arithmetic, the one text of it: each query word's weight from the corpus (bm25_corpus: n chunks,
-- avgdl their mean length) and its document frequency (bm25_df: lexeme, df), idf = ln(1 + (N − df + 0.5) /
-- (df + 0.5)) times k1 + 1, with the two constants of its length normalisation. Used by
-- ragstore.fts_scores (ragstore/sql/functions/fts_scores.sql, its k1 and b for the parameters) and by the
-- bm25 block of hybrid_citus.sql, which compute the statistics each their way.
SELECT t.lexeme,
       ln(1.0::float8 + (s.n - t.df + 0.5::float8) / (t.df + 0.5::float8)) * (%(k1)s + 1.0::float8) AS w,
       %(k1)s * (1.0::float8 - %(b)s) AS c0,
       %(k1)s * %(b)s / s.avgdl AS c1
FROM bm25_df AS t
CROSS JOIN bm25_corpus AS s

-- name: bm25_sum
-- Each chunk's score: Σ over the query words it holds (bm25_postings: chunk_id, lexeme, tf, the chunk's
-- length dl) of w · tf / (tf + c0 + c1 · dl), the weights of bm25_weights.
SELECT p.chunk_id, sum(w.w * p.tf / (p.tf + w.c0 + w.c1 * p.dl)) AS score
FROM bm25_weights AS w
JOIN bm25_postings AS p ON p.lexeme = w.lexeme
GROUP BY p.chunk_id

-- name: fts_top
-- The top fts_n candidates whose chunk the family serves (its vector embeds the current text) and that
-- pass the filter, walked best first (the candidates' own order, kept by the nested loop: no sort here):
-- the walk stops once fts_n are found (a LATERAL probe per candidate by primary key; as EXISTS, the
-- planner hashed both whole tables instead). The probe has the family's row at hand, so it also gives the
-- candidate's cosine to the query (the cosine block in the hybrid statement, NULL in the full-text one):
-- hybrid search reads no row again for it; and the served content's hash (sha), by which the hits block
-- reads the chunk alone.
fts_top AS MATERIALIZED (
    SELECT f.chunk_id, f.score, served.cosine, served.sha
    FROM candidates AS f
    CROSS JOIN LATERAL (
        SELECT {cosine} AS cosine, c.content_sha256 AS sha FROM ragstore.chunks AS c
        JOIN ragstore.{table} AS e
          ON e.family = c.family AND e.chunk_id = c.chunk_id AND e.content_sha256 = c.content_sha256
        {where_fts}
        LIMIT 1
    ) AS served
    LIMIT {fts_n}
)

-- name: fts
-- The full-text leg alone: the family's chunks by BM25, best first.
WITH {query_terms}
SELECT f.chunk_id, c.package_path, f.score, c.text, c.metadata, e.embedding, c.created_at,
       row_number() OVER (ORDER BY f.score DESC, f.chunk_id) AS fts_rank
FROM fts_top AS f
JOIN ragstore.{table} AS e ON e.chunk_id = f.chunk_id
JOIN ragstore.chunks AS c
  ON c.family = e.family AND c.chunk_id = e.chunk_id AND c.content_sha256 = e.content_sha256
ORDER BY fts_rank;

-- name: hybrid
-- Both legs, each top-N (fts_n, vec_n; ranks 1-based), then fused. Every candidate (the union of the two
-- lists) gets BOTH leg scores: its cosine to the query (from the full-text leg's probe when the vector leg
-- missed it) and its BM25 score (from bm25 when the full-text leg missed it, 0 when it holds none of the
-- words).
-- fusion = 'rrf': score = Σ w_leg / (rrf_k + rank_leg) over the legs that found it.
-- fusion = 'cc' (convex combination): score = alpha · norm(cosine) + (1 − alpha) · norm(full text), where
-- norm uses each leg's own top-N list: 'minmax' (x − min) / (max − min); 'zscore' (x − mean) / stddev;
-- 'tmm' (theoretical min-max) (x − lo) / (max − lo) with lo the score's floor (−1 for cosine, 0 for
-- full text). An empty leg (no word matched, a zero query vector) adds 0; a degenerate spread
-- (max = min, stddev 0) gives 1 to the leg's best and 0 below it (minmax) or 0 (zscore).
-- The chunk_id breaks ties. ranks and scores of a leg that missed the chunk are null.
-- Rows are read by key only where needed: the full-text leg's probe checks its candidates are served and
-- gives their cosine; the fused list is then walked best first (the hits block) and each chunk read with
-- its text, metadata and vector, the vector leg's chunks checked to be served there, until k are found.
-- A vector-leg chunk that is not served (its text changed since it was embedded) is left out of the hits
-- but counts in its leg's ranks and statistics, as it was found by the index.
WITH {query_terms},
fts AS MATERIALIZED (
    SELECT chunk_id, score, cosine, sha, row_number() OVER (ORDER BY score DESC, chunk_id) AS rank
    FROM fts_top
),
-- MATERIALIZED, then re-ranked: with iterative index scans (filtered queries) pgvector may return rows
-- slightly out of order, so the rank comes from the exact distance, not from the scan order.
{vec_top},
vec AS MATERIALIZED (
    SELECT chunk_id, 1.0::float8 - distance AS score, sha, row_number() OVER (ORDER BY distance, chunk_id) AS rank
    FROM vec_top
),
stats AS MATERIALIZED (
    SELECT *
    FROM (SELECT min(score) AS f_min, max(score) AS f_max, avg(score) AS f_mean, stddev_pop(score) AS f_sd FROM fts) AS f
    CROSS JOIN (SELECT min(score) AS v_min, max(score) AS v_max, avg(score) AS v_mean, stddev_pop(score) AS v_sd FROM vec) AS v
),
pool AS MATERIALIZED (
    SELECT coalesce(f.chunk_id, v.chunk_id) AS chunk_id,
           f.rank AS fts_rank, f.score AS fts_score, v.rank AS vector_rank, v.score AS vector_score,
           f.cosine AS fts_cosine, coalesce(f.sha, v.sha) AS sha
    FROM fts AS f
    FULL OUTER JOIN vec AS v ON v.chunk_id = f.chunk_id
),
-- The BM25 scores of the pool's chunks (a hashed lookup; joining bm25 itself would rescan it per row).
pool_bm25 AS MATERIALIZED (
    SELECT b.chunk_id, b.score FROM bm25 AS b WHERE b.chunk_id IN (SELECT chunk_id FROM pool)
),
filled AS MATERIALIZED (
    SELECT p.chunk_id, p.fts_rank, p.fts_score, p.vector_rank, p.vector_score, p.sha,
           coalesce(p.vector_score, p.fts_cosine) AS cosine,
           coalesce(p.fts_score, b.score, 0.0::float8) AS lexical
    FROM pool AS p
    LEFT JOIN pool_bm25 AS b ON b.chunk_id = p.chunk_id
),
normed AS (
    SELECT x.*, {norm}
    FROM filled AS x
    CROSS JOIN stats AS s
),
fused AS (
    SELECT n.*, {fuse} AS score
    FROM normed AS n
)
{hits};

-- name: norm_minmax
-- The legs' scores normalised in the hybrid statement (normed: x the candidate, s its legs' statistics),
-- one block per normalisation: v_norm (cosine) and f_norm (full text). minmax: (x − min) / (max − min),
-- and for a degenerate spread 1 at the leg's best and 0 below it.
coalesce((x.cosine - s.v_min) / nullif(s.v_max - s.v_min, 0.0),
         CASE WHEN x.cosine >= s.v_max THEN 1.0 ELSE 0.0 END)::float8 AS v_norm,
coalesce((x.lexical - s.f_min) / nullif(s.f_max - s.f_min, 0.0),
         CASE WHEN x.lexical >= s.f_max THEN 1.0 ELSE 0.0 END)::float8 AS f_norm

-- name: norm_zscore
-- zscore: (x − mean) / stddev, 0 for a degenerate spread.
coalesce((x.cosine - s.v_mean) / nullif(s.v_sd, 0.0), 0.0)::float8 AS v_norm,
coalesce((x.lexical - s.f_mean) / nullif(s.f_sd, 0.0), 0.0)::float8 AS f_norm

-- name: norm_tmm
-- tmm (theoretical min-max): (x − lo) / (max − lo), lo −1 for cosine and 0 for full text.
coalesce((x.cosine + 1.0) / nullif(s.v_max + 1.0, 0.0), 0.0)::float8 AS v_norm,
coalesce(x.lexical / nullif(s.f_max, 0.0), 0.0)::float8 AS f_norm

-- name: fuse_rrf
-- The fused score of a candidate (n) in the hybrid statement, one block per fusion. rrf: Σ w_leg / (rrf_k
-- + rank_leg) over the legs that found it.
coalesce(%(w_fts)s::float8 / (%(rrf_k)s::int + n.fts_rank), 0.0::float8)
+ coalesce(%(w_vec)s::float8 / (%(rrf_k)s::int + n.vector_rank), 0.0::float8)

-- name: fuse_cc
-- cc (convex combination): alpha · v_norm + (1 − alpha) · f_norm.
%(alpha)s::float8 * n.v_norm + (1.0::float8 - %(alpha)s::float8) * n.f_norm

-- name: cosine
-- A full-text candidate's cosine to the query in the hybrid statement's probe (e: its family row); 0 for a
-- zero query vector (use_vector false) and where pgvector gives NaN.
CASE WHEN %(use_vector)s
     THEN coalesce(nullif(1.0::float8 - (e.embedding <=> %(q)s::{vtype}), 'NaN'::float8), 0.0::float8)
     ELSE 0.0::float8 END

-- name: hits
-- The k best of the fused list whose chunk the family serves, with text, metadata (NULL when empty: no
-- JSON to parse) and, when asked for, vector: walked best first, a LATERAL probe by primary key per chunk
-- ({hit_row}: hit_row_plain, or hit_row_vector when the hits carry their vector), stopping at k
-- (hybrid_citus.sql has the Citus form, a join).
SELECT u.chunk_id, h.package_path, u.score, h.text, h.metadata, h.embedding, h.created_at,
       u.fts_rank, u.fts_score, u.vector_rank, u.vector_score, u.cosine, u.lexical
FROM (SELECT f.* FROM fused AS f ORDER BY f.score DESC, f.chunk_id) AS u
CROSS JOIN LATERAL (
{hit_row}
) AS h
{guard}
ORDER BY u.score DESC, u.chunk_id
LIMIT {k}

-- name: hit_row_plain
-- A hit's chunk, read alone: served when its content is the one whose vector the legs read (u.sha: the
-- hash the full-text leg's probe found served, or the one the vector leg's scan read).
SELECT c.package_path, c.text, nullif(c.metadata, '{{}}'::jsonb) AS metadata, NULL::{vtype} AS embedding,
       c.created_at
FROM ragstore.chunks AS c
WHERE c.family = %(family)s AND c.chunk_id = u.chunk_id AND c.content_sha256 = u.sha

-- name: hit_row_vector
-- A hit's chunk and vector.
SELECT c.package_path, c.text, nullif(c.metadata, '{{}}'::jsonb) AS metadata, e.embedding, c.created_at
FROM ragstore.{table} AS e
JOIN ragstore.chunks AS c
  ON c.family = e.family AND c.chunk_id = e.chunk_id AND c.content_sha256 = e.content_sha256
WHERE e.chunk_id = u.chunk_id

-- name: guard
-- The hits of a search on a family as the caller remembers it (ragstore.search.hybrid.
-- hybrid_search_if_current): none unless the family's row is still that one (the query vector was embedded
-- with its model), checked in the same snapshot as the search, once (an uncorrelated EXISTS). g_row: the
-- remembered row's backend, model, dim, vector_type, table_name, state and options as a JSON array.
WHERE EXISTS (
    SELECT FROM ragstore.families AS g
    WHERE g.name = %(family)s
      AND jsonb_build_array(g.backend, g.model, g.dim, g.vector_type, g.table_name, g.state, g.options)
          = %(g_row)s::jsonb
)

-- name: vec_top
-- The vector leg's top vec_n. The subquery s sets hnsw.ef_search / hnsw.iterative_scan with
-- set_config(..., is_local => true) and the LATERAL scan references it ({where_vec} holds
-- "s.settings IS NOT NULL"), so the settings are in place before the index is read: the whole search is
-- one statement (ragstore.search.drive.run_with_settings runs it as its own transaction, or between a
-- savepoint and its rollback, so no setting outlives it). A LIMIT subquery laterally joined to another is
-- not pushed down by Citus: hybrid_citus.sql has the Citus form.
vec_top AS MATERIALIZED (
    SELECT t.chunk_id, t.distance, t.sha
    FROM (
        SELECT set_config('hnsw.ef_search', %(ragstore_ef)s, true)
               || set_config('hnsw.iterative_scan', %(ragstore_iterative)s, true) AS settings
    ) AS s
    CROSS JOIN LATERAL (
{vec_scan}
    ) AS t
)

-- name: vec_scan
-- The vector leg's index scan (in vec_top, here and in hybrid_citus.sql), with the content hash of the
-- vector it read. {vec_order} is the distance the family's HNSW index serves (ragstore.families.storage:
-- the column, its halfvec cast or its binary code), {vec_candidates} vec_n, or vec_n × the rerank factor
-- for the bit storage, whose scan is wrapped in vec_scan_rerank.
SELECT e.chunk_id, (e.embedding <=> %(q)s::{vtype})::float8 AS distance, e.content_sha256 AS sha
FROM ragstore.{table} AS e
{where_vec}
ORDER BY {vec_order}
LIMIT {vec_candidates}

-- name: vec_scan_rerank
-- The bit storage's vector leg: the candidates its binary index found (the vec_scan block inside), re-ranked
-- by the full vectors' exact distance, the first vec_n kept.
SELECT r.chunk_id, r.distance, r.sha
FROM (
{vec_scan}
) AS r
ORDER BY r.distance, r.chunk_id
LIMIT {vec_n}

-- name: store_fusion
-- A family's fusion settings (ragstore family tune): option "fusion" set to a JSON object, or removed
-- when the parameter is null (back to the default). Returns the family's name, none when it does not exist.
UPDATE ragstore.families
SET options = CASE WHEN %(fusion)s::jsonb IS NULL THEN options - 'fusion'
                   ELSE options || jsonb_build_object('fusion', %(fusion)s::jsonb) END
WHERE name = %(family)s
RETURNING name;
