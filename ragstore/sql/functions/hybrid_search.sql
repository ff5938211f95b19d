-- ragstore.hybrid_search, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- ragstore.hybrid_search(family, query_text, query_vector, k): full text (BM25) and vector over the
-- family's chunks, fused by the family's stored settings (option "fusion", written by `ragstore family
-- tune`; default convex combination, theoretical min-max, dense weight 0.8, 20 per leg): the statement
-- of ragstore/sql/hybrid.sql in one function. Refuses a NULL query text or vector.
-- Called by: everyone.

CREATE OR REPLACE FUNCTION ragstore.hybrid_search(family text, query_text text, query_vector vector, k integer)
RETURNS TABLE (
    chunk_id     text,
    package_path text,
    score        float8,
    fts_rank     bigint,
    fts_score    float8,
    vector_rank  bigint,
    vector_score float8,
    text         text
)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET hnsw.ef_search = 100
AS $fn$
DECLARE
    fam     ragstore.families%ROWTYPE;
    config  regconfig;
    fusion  jsonb;
    per_leg integer;
BEGIN
    fam := ragstore.search_family('ragstore.hybrid_search', family, k);
    IF query_text IS NULL THEN
        RAISE EXCEPTION 'ragstore.hybrid_search: the query text is NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF query_vector IS NULL THEN
        RAISE EXCEPTION 'ragstore.hybrid_search: the query vector is NULL (give a vector of the family''s dimension)'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF vector_dims(query_vector) <> fam.dim THEN
        RAISE EXCEPTION 'ragstore.hybrid_search: the query vector has % dimensions, family % holds %-d vectors',
            vector_dims(query_vector), family, fam.dim USING ERRCODE = 'data_exception';
    END IF;
    config := coalesce(fam.options ->> 'fts_config', 'english')::regconfig;
    fusion := '{"fusion": "cc", "normalization": "tmm", "alpha": 0.8, "per_leg": 20, "rrf_k": 60}'::jsonb
              || coalesce(fam.options -> 'fusion', '{}'::jsonb);
    per_leg := greatest(least((fusion ->> 'per_leg')::integer, 1000), k);
    PERFORM set_config('hnsw.ef_search',
                       least(greatest(ragstore.family_index_candidates(fam, per_leg), 100), 1000)::text, true);
    RETURN QUERY EXECUTE format($q$
        WITH bm25 AS MATERIALIZED (
            SELECT s.chunk_id, round(s.score * 1e12::float8) / 1e12::float8 AS score
            FROM ragstore.fts_scores($5, $1, $2) AS s
        ),
        candidates AS (
            SELECT b.chunk_id, b.score FROM bm25 AS b WHERE $11
            UNION ALL
            SELECT c.chunk_id, coalesce(b.score, 0.0::float8)
            FROM ragstore.chunks AS c LEFT JOIN bm25 AS b ON b.chunk_id = c.chunk_id
            WHERE NOT $11 AND c.family = $5 AND c.tsv @@ websearch_to_tsquery($1, $2)
        ),
        fts_top AS MATERIALIZED (
            SELECT f.chunk_id, f.score, served.cosine
            FROM (SELECT x.chunk_id, x.score FROM candidates AS x ORDER BY x.score DESC, x.chunk_id) AS f
            CROSS JOIN LATERAL (
                SELECT CASE WHEN $12
                            THEN coalesce(nullif(1.0::float8 - (e.embedding <=> $3::%2$s), 'NaN'::float8), 0.0::float8)
                            ELSE 0.0::float8 END AS cosine
                FROM ragstore.chunks AS c
                JOIN ragstore.%1$I AS e
                  ON e.family = c.family AND e.chunk_id = c.chunk_id AND e.content_sha256 = c.content_sha256
                WHERE c.family = $5 AND c.chunk_id = f.chunk_id
                LIMIT 1
            ) AS served
            ORDER BY f.score DESC, f.chunk_id
            LIMIT $6
        ),
        fts AS MATERIALIZED (
            SELECT t.chunk_id, t.score, t.cosine, row_number() OVER (ORDER BY t.score DESC, t.chunk_id) AS rank
            FROM fts_top AS t
        ),
        vec_top AS MATERIALIZED (
            -- the index read in the family's storage (ragstore.family_index_order), its candidates (more
            -- than per_leg for bit) re-ranked by the exact distance
            SELECT r.chunk_id, r.distance
            FROM (SELECT e.chunk_id, (e.embedding <=> $3::%2$s)::float8 AS distance
                  FROM ragstore.%1$I AS e WHERE $12 ORDER BY %3$s LIMIT $13) AS r
            ORDER BY r.distance, r.chunk_id
            LIMIT $6
        ),
        vec AS MATERIALIZED (
            SELECT t.chunk_id, 1.0::float8 - t.distance AS score,
                   row_number() OVER (ORDER BY t.distance, t.chunk_id) AS rank
            FROM vec_top AS t
        ),
        stats AS MATERIALIZED (
            SELECT f.lo AS f_min, f.hi AS f_max, f.mean AS f_mean, f.sd AS f_sd,
                   v.lo AS v_min, v.hi AS v_max, v.mean AS v_mean, v.sd AS v_sd
            FROM (SELECT min(s.score) AS lo, max(s.score) AS hi, avg(s.score) AS mean, stddev_pop(s.score) AS sd
                  FROM fts AS s) AS f
            CROSS JOIN (SELECT min(s.score) AS lo, max(s.score) AS hi, avg(s.score) AS mean,
                               stddev_pop(s.score) AS sd FROM vec AS s) AS v
        ),
        pool AS MATERIALIZED (
            SELECT coalesce(f.chunk_id, v.chunk_id) AS chunk_id,
                   f.rank AS fts_rank, f.score AS fts_score, v.rank AS vector_rank, v.score AS vector_score,
                   f.cosine AS fts_cosine
            FROM fts AS f FULL OUTER JOIN vec AS v ON v.chunk_id = f.chunk_id
        ),
        pool_bm25 AS MATERIALIZED (
            SELECT b.chunk_id, b.score FROM bm25 AS b WHERE b.chunk_id IN (SELECT p.chunk_id FROM pool AS p)
        ),
        filled AS MATERIALIZED (
            SELECT p.chunk_id, p.fts_rank, p.fts_score, p.vector_rank, p.vector_score,
                   coalesce(p.vector_score, p.fts_cosine) AS cosine,
                   coalesce(p.fts_score, b.score, 0.0::float8) AS lexical
            FROM pool AS p LEFT JOIN pool_bm25 AS b ON b.chunk_id = p.chunk_id
        ),
        normed AS (
            SELECT x.*,
                   CASE $8
                       WHEN 'minmax' THEN coalesce((x.cosine - s.v_min) / nullif(s.v_max - s.v_min, 0.0),
                                                   CASE WHEN x.cosine >= s.v_max THEN 1.0 ELSE 0.0 END)
                       WHEN 'zscore' THEN coalesce((x.cosine - s.v_mean) / nullif(s.v_sd, 0.0), 0.0)
                       ELSE coalesce((x.cosine + 1.0) / nullif(s.v_max + 1.0, 0.0), 0.0)
                   END::float8 AS v_norm,
                   CASE $8
                       WHEN 'minmax' THEN coalesce((x.lexical - s.f_min) / nullif(s.f_max - s.f_min, 0.0),
                                                   CASE WHEN x.lexical >= s.f_max THEN 1.0 ELSE 0.0 END)
                       WHEN 'zscore' THEN coalesce((x.lexical - s.f_mean) / nullif(s.f_sd, 0.0), 0.0)
                       ELSE coalesce(x.lexical / nullif(s.f_max, 0.0), 0.0)
                   END::float8 AS f_norm
            FROM filled AS x CROSS JOIN stats AS s
        ),
        fused AS (
            SELECT n.*,
                   CASE WHEN $7 = 'rrf'
                        THEN coalesce(1.0::float8 / ($10 + n.fts_rank), 0.0::float8)
                             + coalesce(1.0::float8 / ($10 + n.vector_rank), 0.0::float8)
                        ELSE $9 * n.v_norm + (1.0::float8 - $9) * n.f_norm
                   END AS fused_score
            FROM normed AS n
        )
        SELECT u.chunk_id, h.package_path, u.fused_score, u.fts_rank, u.fts_score, u.vector_rank, u.vector_score,
               h.text
        FROM (SELECT w.* FROM fused AS w ORDER BY w.fused_score DESC, w.chunk_id) AS u
        CROSS JOIN LATERAL (
            SELECT c.package_path, c.text
            FROM ragstore.%1$I AS e
            JOIN ragstore.chunks AS c
              ON c.family = e.family AND c.chunk_id = e.chunk_id AND c.content_sha256 = e.content_sha256
            WHERE e.chunk_id = u.chunk_id
        ) AS h
        ORDER BY u.fused_score DESC, u.chunk_id
        LIMIT $4
    $q$, fam.table_name, format('%s(%s)', fam.vector_type, fam.dim::integer), ragstore.family_index_order(fam, '$3'))
    USING config, query_text, query_vector, k, fam.name, per_leg, fusion ->> 'fusion',
          fusion ->> 'normalization', (fusion ->> 'alpha')::float8, (fusion ->> 'rrf_k')::integer,
          query_text !~* '["'']|(^|\s)-\S|(^|\s)or(\s|$)', vector_norm(query_vector) > 0,
          ragstore.family_index_candidates(fam, per_leg);
END
$fn$;
COMMENT ON FUNCTION ragstore.hybrid_search(text, text, vector, integer) IS
    'ragstore hybrid search: full text (BM25) + vector over the family''s chunks fused by its stored settings (default convex combination, theoretical min-max, dense weight 0.8, 20 per leg); ranks and scores per leg';
