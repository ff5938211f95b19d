-- ragstore.hybrid_search, ragstore.fts_search and ragstore.search_auto: search for SQL users. hybrid_search
-- was created by migration 0005 and redefined by 0007 (the family's own chunks), 0010 (fusion by the
-- family's settings), 0012 (BM25), 0017 (the CLI statement's shape, 20 per leg) and 0021 (a NULL query refused); fts_search comes
-- from 0010 and was redefined by 0012; search_auto comes from 0010 (migrations/versions/sql/0010_fusion.sql,
-- 0012_bm25.sql, 0017_term_df.sql and 0021_definer_audit.sql).
--
-- ragstore.search_auto(family, query_text, query_vector, k) runs the family's DEFAULT mode, the one
-- `ragstore search` runs: full text for an offline family, hybrid for a semantic family (the query text
-- and its vector, embedded by the application with the family's model), HNSW for a bare vector.
--
-- Hybrid: each leg takes its top N chunks of the family (N = the family's per_leg, 20 by default): the
-- full-text leg matches websearch_to_tsquery of the query (quotes, "or" and -exclusions work; a query of
-- plain words matches chunks holding any of them) ranked by BM25 (k1 1.2, b 0.75) from the postings in
-- ragstore.chunk_terms (tf, chunk length, df) and the family's chunk count and total length
-- (ragstore.family_chunk_deltas); the vector leg orders by cosine distance on the family's HNSW index.
-- The legs are fused by the family's stored settings (`ragstore family tune`; `ragstore family show`
-- prints them): by default a convex combination 0.8 * (cosine + 1)/(best cosine + 1) + 0.2 * full-text
-- score / best full-text score, the bests over each leg's list; or RRF, 1/(rrf_k + rank) per leg. A chunk one leg missed shows that
-- leg's rank and score as NULL.
--
-- Examples (psql):
--
--   SELECT chunk_id, round(score::numeric, 4) AS score, fts_rank, vector_rank
--   FROM ragstore.hybrid_search('docs', 'copy files "preserve mode" -remote',
--                               ragstore.offline_embed('copy files'), 10);
--
--   -- a MiniLM family: embed the query in the application, pass it as a vector literal
--   SELECT * FROM ragstore.search_auto('man_minilm', 'copy files and directories', $1::vector, 10);
--   -- an offline family: full text, as `ragstore search` does
--   SELECT * FROM ragstore.search_auto('docs', 'copy files', NULL, 10);
--
-- The functions below are the text migrations 0012 (fts_top, fts_search), 0017 (fts_scores, hybrid_search)
-- and 0010 (search_auto)
-- run (tests/unit/test_sql_copies.py checks so).

-- ragstore.fts_scores(family, config, query_text, k1, b): every chunk of the family holding a word of the
-- query, with its BM25 score, Σ over the words it holds of idf · tf · (k1 + 1) / (tf + k1 · (1 − b + b ·
-- dl / avgdl)), idf = ln(1 + (N − df + 0.5) / (df + 0.5)). df comes from ragstore.chunk_term_df, tf and dl
-- from ragstore.chunk_terms through its primary key (read once); N and avgdl from the family's ledger.
-- only_chunks, when given, keeps those chunks' scores alone (the df still count every chunk). The same
-- scores `ragstore search` computes (ragstore/sql/hybrid.sql calls this function).
CREATE OR REPLACE FUNCTION ragstore.fts_scores(family text, config regconfig, query_text text, k1 float8 DEFAULT 1.2,
                                               b float8 DEFAULT 0.75, only_chunks text[] DEFAULT NULL)
RETURNS TABLE (chunk_id text, score float8)
LANGUAGE sql STABLE PARALLEL SAFE AS $fn$
    WITH corpus AS MATERIALIZED (
        SELECT greatest(coalesce(sum(d.delta), 0), 1)::float8 AS n,
               greatest(coalesce(sum(d.tokens), 0), 1)::float8 / greatest(coalesce(sum(d.delta), 0), 1)::float8
                 AS avgdl
        FROM ragstore.family_chunk_deltas AS d WHERE d.family = fts_scores.family
    ),
    weights AS MATERIALIZED (
        SELECT t.lexeme,
               ln(1.0::float8 + (s.n - t.df + 0.5::float8) / (t.df + 0.5::float8)) * (k1 + 1.0::float8) AS w,
               k1 * (1.0::float8 - b) AS c0,
               k1 * b / s.avgdl AS c1
        FROM ragstore.chunk_term_df AS t
        CROSS JOIN corpus AS s
        WHERE t.family = fts_scores.family
          AND t.lexeme = ANY (ARRAY(SELECT DISTINCT w FROM unnest(tsvector_to_array(to_tsvector(config, query_text))) AS w))
        GROUP BY t.lexeme, t.df, s.n, s.avgdl
    )
    SELECT t.chunk_id, sum(w.w * t.tf / (t.tf + w.c0 + w.c1 * t.dl))
    FROM weights AS w
    JOIN ragstore.chunk_terms AS t ON t.family = fts_scores.family AND t.lexeme = w.lexeme
    WHERE only_chunks IS NULL OR t.chunk_id = ANY (only_chunks)
    GROUP BY t.chunk_id
$fn$;
COMMENT ON FUNCTION ragstore.fts_scores(text, regconfig, text, float8, float8, text[]) IS
    'ragstore: BM25 score of every chunk of the family holding a word of the query (postings in ragstore.chunk_terms, document frequencies in ragstore.chunk_term_df)';

-- ragstore.fts_top(family, query_text, k): the family's top k chunks by BM25 (chunk_id, score), chunk_id
-- breaking ties; only chunks the family serves (its vector embeds the current text). A query of plain
-- words matches chunks holding any of them; quotes, "or" and -exclusions keep websearch_to_tsquery's strict
-- meaning (those chunks, 0 when they hold none of the words). The full-text leg of both functions below.
CREATE FUNCTION ragstore.fts_top(family text, query_text text, k integer)
RETURNS TABLE (chunk_id text, score float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $fn$
DECLARE
    fam    ragstore.families%ROWTYPE;
    config regconfig;
BEGIN
    fam := ragstore.search_family('ragstore.fts_top', family, k);
    IF query_text IS NULL THEN
        RAISE EXCEPTION 'ragstore.fts_top: the query text is NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    config := coalesce(fam.options ->> 'fts_config', 'english')::regconfig;
    RETURN QUERY EXECUTE format($q$
        WITH bm25 AS MATERIALIZED (SELECT s.chunk_id, s.score FROM ragstore.fts_scores($3, $1, $2) AS s),
        candidates AS (
            SELECT b.chunk_id, b.score FROM bm25 AS b WHERE $5
            UNION ALL
            SELECT c.chunk_id, coalesce(b.score, 0.0::float8)
            FROM ragstore.chunks AS c LEFT JOIN bm25 AS b ON b.chunk_id = c.chunk_id
            WHERE NOT $5 AND c.family = $3 AND c.tsv @@ websearch_to_tsquery($1, $2)
        )
        SELECT f.chunk_id, f.score
        FROM (SELECT x.chunk_id, x.score FROM candidates AS x ORDER BY x.score DESC, x.chunk_id) AS f
        CROSS JOIN LATERAL (
            SELECT 1 FROM ragstore.chunks AS c
            JOIN ragstore.%1$I AS e
              ON e.family = c.family AND e.chunk_id = c.chunk_id AND e.content_sha256 = c.content_sha256
            WHERE c.family = $3 AND c.chunk_id = f.chunk_id
            LIMIT 1
        ) AS served
        ORDER BY f.score DESC, f.chunk_id
        LIMIT $4
    $q$, fam.table_name)
    USING config, query_text, fam.name, k, query_text !~* '["'']|(^|\s)-\S|(^|\s)or(\s|$)';
END
$fn$;
COMMENT ON FUNCTION ragstore.fts_top(text, text, integer) IS
    'ragstore: the family''s top k chunks by BM25 (plain words match any; websearch operators keep their meaning)';

-- ragstore.search_family(caller, family, k): the family's registry row for a search function named
-- caller, after checking k (1 to 1000) and that the family exists; one message shape for every caller.
CREATE FUNCTION ragstore.search_family(caller text, family text, k integer) RETURNS ragstore.families
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $fn$
DECLARE
    fam ragstore.families%ROWTYPE;
BEGIN
    IF k IS NULL OR k < 1 OR k > 1000 THEN
        RAISE EXCEPTION '%: k must be an integer from 1 to 1000, got %', caller, k
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO fam FROM ragstore.families AS f WHERE f.name = search_family.family;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: no family named %', caller, family USING ERRCODE = 'undefined_object';
    END IF;
    RETURN fam;
END
$fn$;
COMMENT ON FUNCTION ragstore.search_family(text, text, integer) IS
    'ragstore: a search function''s family row, after checking k (1 to 1000) and that the family exists';

-- ragstore.hybrid_search(family, query_text, query_vector, k): full text (BM25) + vector over the family's
-- own chunks, fused by the family's stored settings (default: convex combination of cosine and BM25
-- scores, each by theoretical min-max, dense weight 0.8, each leg's top 20). k is at most 1000.
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
    PERFORM set_config('hnsw.ef_search', least(greatest(per_leg, 100), 1000)::text, true);
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
            SELECT e.chunk_id, (e.embedding <=> $3::%2$s)::float8 AS distance
            FROM ragstore.%1$I AS e WHERE $12 ORDER BY e.embedding <=> $3::%2$s LIMIT $6
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
    $q$, fam.table_name, format('%s(%s)', fam.vector_type, fam.dim::integer))
    USING config, query_text, query_vector, k, fam.name, per_leg, fusion ->> 'fusion',
          fusion ->> 'normalization', (fusion ->> 'alpha')::float8, (fusion ->> 'rrf_k')::integer,
          query_text !~* '["'']|(^|\s)-\S|(^|\s)or(\s|$)', vector_norm(query_vector) > 0;
END
$fn$;
COMMENT ON FUNCTION ragstore.hybrid_search(text, text, vector, integer) IS
    'ragstore hybrid search: full text (BM25) + vector over the family''s chunks fused by its stored settings (default convex combination, theoretical min-max, dense weight 0.8, 20 per leg); ranks and scores per leg';

-- ragstore.fts_search(family, query_text, k): the full-text leg alone (BM25), over the family's own chunks.
CREATE OR REPLACE FUNCTION ragstore.fts_search(family text, query_text text, k integer DEFAULT 10)
RETURNS TABLE (chunk_id text, package_path text, score float8, text text)
LANGUAGE sql STABLE PARALLEL SAFE
AS $fn$
    SELECT t.chunk_id, c.package_path, t.score, c.text
    FROM ragstore.fts_top(fts_search.family, fts_search.query_text, fts_search.k) AS t
    JOIN ragstore.chunks AS c ON c.family = fts_search.family AND c.chunk_id = t.chunk_id
    ORDER BY t.score DESC, t.chunk_id
$fn$;
COMMENT ON FUNCTION ragstore.fts_search(text, text, integer) IS
    'ragstore full-text search over the family''s own chunks (BM25 k1 1.2, b 0.75; plain words match any)';

-- ragstore.search_auto(family, query_text, query_vector, k): the family's default search mode, as
-- `ragstore search` runs it: full text for an offline family (its vectors are fingerprints); hybrid for a
-- semantic family given the query text and its vector (SQL cannot run the model: embed the query in the
-- application); HNSW when only a vector is given.
CREATE OR REPLACE FUNCTION ragstore.search_auto(family text, query_text text, query_vector vector DEFAULT NULL,
                                                k integer DEFAULT 10)
RETURNS TABLE (chunk_id text, package_path text, score float8, text text)
LANGUAGE plpgsql STABLE
AS $fn$
DECLARE
    fam ragstore.families%ROWTYPE;
BEGIN
    SELECT * INTO fam FROM ragstore.families AS f WHERE f.name = family;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'ragstore.search_auto: no family named %', family USING ERRCODE = 'undefined_object';
    END IF;
    IF query_text IS NOT NULL AND btrim(query_text) = '' THEN
        RAISE EXCEPTION 'ragstore.search_auto: the query text is empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF query_text IS NULL THEN
        IF query_vector IS NULL THEN
            RAISE EXCEPTION 'ragstore.search_auto: give a query text, a query vector or both'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        RETURN QUERY SELECT s.chunk_id, s.package_path, s.score, s.text FROM ragstore.search(family, query_vector, k) AS s;
    ELSIF fam.backend = 'offline' THEN
        RETURN QUERY SELECT s.chunk_id, s.package_path, s.score, s.text FROM ragstore.fts_search(family, query_text, k) AS s;
    ELSIF query_vector IS NULL THEN
        RAISE EXCEPTION 'ragstore.search_auto: family % uses the % backend, which SQL cannot run; embed the query '
            'in your application and pass it as query_vector', quote_literal(family), fam.backend
            USING ERRCODE = 'feature_not_supported';
    ELSE
        RETURN QUERY SELECT h.chunk_id, h.package_path, h.score, h.text
                     FROM ragstore.hybrid_search(family, query_text, query_vector, k) AS h;
    END IF;
END
$fn$;
COMMENT ON FUNCTION ragstore.search_auto(text, text, vector, integer) IS
    'ragstore: the family''s default search (full text for offline families, hybrid for semantic ones, HNSW for a bare vector)';
