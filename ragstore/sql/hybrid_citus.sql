-- Full text and hybrid search on Citus: the blocks of hybrid.sql that Citus cannot plan as written, in a
-- form it pushes to every shard. Same parameters, same columns, same scores and order as one node.
-- - bm25: on Citus no trigger keeps the postings (ragstore.chunk_terms) or the family's ledger (Citus
--   distributes no table with triggers), so the statistics come from the chunks' own tsv, which every
--   write path keeps: one pass over the family's chunks on every shard for N and the total length, one
--   over the chunks holding a query word for tf, the chunk's length (dl) and a word's document frequency
--   (df, its chunks). The arithmetic is the blocks bm25_weights and bm25_sum of hybrid.sql, which
--   ragstore.fts_scores runs too, so the scores are the single node's: both round the score to 12
--   decimals (hybrid.sql's bm25 block says why).
-- - fts_top and hits: a join of the candidates to their chunk and vector instead of a LATERAL probe per
--   candidate (Citus pushes no LIMIT subquery laterally joined to another); the same rows, as the probe
--   is by key.
-- - vec_top: no settings subquery: the HNSW settings are SET LOCAL and propagated to the workers
--   (ragstore.search.drive.run_with_settings); each shard returns its top vec_n, the coordinator merges.

-- name: bm25
bm25_corpus AS MATERIALIZED (
    SELECT greatest(n.n, 1)::float8 AS n, greatest(t.tokens, 1)::float8 / greatest(n.n, 1)::float8 AS avgdl
    FROM (SELECT count(*) AS n FROM ragstore.chunks AS c WHERE c.family = %(family)s) AS n
    CROSS JOIN (
        SELECT coalesce(sum(coalesce(array_length(u.positions, 1), 1)), 0) AS tokens
        FROM ragstore.chunks AS c CROSS JOIN LATERAL unnest(c.tsv) AS u
        WHERE c.family = %(family)s
    ) AS t
),
-- Every (chunk, lexeme) of the family's chunks holding a query word: tf and the chunk's length dl (a
-- window over the chunk's lexemes, on its shard).
bm25_postings AS MATERIALIZED (
    SELECT p.chunk_id, p.lexeme, p.tf, p.dl
    FROM (
        SELECT c.chunk_id, u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf,
               sum(coalesce(array_length(u.positions, 1), 1)) OVER (PARTITION BY c.chunk_id) AS dl
        FROM ragstore.chunks AS c CROSS JOIN LATERAL unnest(c.tsv) AS u
        WHERE c.family = %(family)s
          AND tsvector_to_array(c.tsv) && tsvector_to_array(to_tsvector(%(fts_config)s::regconfig, %(query)s))
    ) AS p
    WHERE p.lexeme = ANY (tsvector_to_array(to_tsvector(%(fts_config)s::regconfig, %(query)s)))
),
bm25_df AS MATERIALIZED (
    SELECT p.lexeme, count(*) AS df FROM bm25_postings AS p GROUP BY p.lexeme
),
bm25_weights AS MATERIALIZED ({bm25_weights}),
bm25 AS MATERIALIZED (
    SELECT s.chunk_id, round(s.score * 1e12::float8) / 1e12::float8 AS score FROM ({bm25_sum}) AS s
)

-- name: fts_top
-- The top fts_n candidates whose chunk the family serves (its vector embeds the current text) and that
-- pass the filter (the filter holds the join to the candidate: family and chunk_id), with the cosine
-- block's value as on one node.
fts_top AS MATERIALIZED (
    SELECT f.chunk_id, f.score, {cosine} AS cosine, c.content_sha256 AS sha
    FROM candidates AS f
    CROSS JOIN ragstore.chunks AS c
    JOIN ragstore.{table} AS e
      ON e.family = c.family AND e.chunk_id = c.chunk_id AND e.content_sha256 = c.content_sha256
    {where_fts}
    ORDER BY f.score DESC, f.chunk_id
    LIMIT {fts_n}
)

-- name: hits
-- The k best of the fused list whose chunk the family serves, with text, metadata and vector: a join
-- (Citus pushes no LIMIT subquery laterally joined to another), the same rows as one node's walk.
SELECT u.chunk_id, c.package_path, u.score, c.text, nullif(c.metadata, '{{}}'::jsonb) AS metadata, {hit_vector},
       c.created_at, u.fts_rank, u.fts_score, u.vector_rank, u.vector_score, u.cosine, u.lexical
FROM fused AS u
JOIN ragstore.{table} AS e ON e.chunk_id = u.chunk_id
JOIN ragstore.chunks AS c
  ON c.family = e.family AND c.chunk_id = e.chunk_id AND c.content_sha256 = e.content_sha256
ORDER BY u.score DESC, u.chunk_id
LIMIT {k}

-- name: vec_top
vec_top AS MATERIALIZED (
    SELECT t.chunk_id, t.distance, t.sha
    FROM (
{vec_scan}
    ) AS t
)
