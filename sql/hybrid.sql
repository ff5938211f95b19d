-- ragstore.hybrid_search: hybrid (full text + vector) search for SQL users, created by migration 0005 and
-- redefined by migration 0007 (migrations/versions/sql/0007_family_chunks.sql) to read the family's own
-- chunks only (its IDF counts them alone).
--
-- Each leg takes its top 50 chunks of the family: the full-text leg matches websearch_to_tsquery of the
-- query (quotes, "or" and -exclusions work; a query of plain words matches chunks holding any of them)
-- ranked by the sum of idf(word) * (holds word + cd/(cd + 1)), cd = ts_rank_cd(tsv, word, 2); the vector
-- leg orders by cosine
-- distance on the family's HNSW index. The legs are fused by Reciprocal Rank Fusion, 1/(60 + rank) per
-- leg with 1-based ranks; a chunk one leg missed shows that leg's rank and score as NULL.
--
-- Examples (psql):
--
--   SELECT chunk_id, round(score::numeric, 5) AS rrf, fts_rank, vector_rank
--   FROM ragstore.hybrid_search('docs', 'copy files "preserve mode" -remote',
--                               ragstore.offline_embed('copy files'), 10);
--
--   -- a MiniLM family: embed the query in the application, pass it as a vector literal
--   SELECT * FROM ragstore.hybrid_search('man_minilm', 'copy files and directories', $1::vector, 10);
--
-- The function below is the text migration 0007 runs (tests/integration/test_hybrid_sql.py checks so).

-- ragstore.hybrid_search(family, query_text, query_vector, k): full text + vector over the family's own
-- chunks, each leg's top 50, fused by RRF (k 60); the IDF of the full-text score counts the family's
-- chunks only. k is at most 1000 (at most 100 rows come back: two legs of 50).
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
    fam    ragstore.families%ROWTYPE;
    config regconfig;
    plain  boolean;
BEGIN
    IF k IS NULL OR k < 1 OR k > 1000 THEN
        RAISE EXCEPTION 'ragstore.hybrid_search: k must be an integer from 1 to 1000, got %', k
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO fam FROM ragstore.families AS f WHERE f.name = family;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'ragstore.hybrid_search: no family named %', family USING ERRCODE = 'undefined_object';
    END IF;
    IF vector_dims(query_vector) <> fam.dim THEN
        RAISE EXCEPTION 'ragstore.hybrid_search: the query vector has % dimensions, family % holds %-d vectors',
            vector_dims(query_vector), family, fam.dim USING ERRCODE = 'data_exception';
    END IF;
    config := coalesce(fam.options ->> 'fts_config', 'english')::regconfig;
    plain := query_text !~* '["'']|(^|\s)-\S|(^|\s)or(\s|$)';
    RETURN QUERY EXECUTE format($q$
        WITH q AS MATERIALIZED (SELECT websearch_to_tsquery($1, $2) AS strict),
        terms AS MATERIALIZED (
            SELECT l.tq, ln(1.0 + (n.n - l.df + 0.5) / (l.df + 0.5)) AS idf
            FROM (
                SELECT x.tq, (SELECT count(*) FROM ragstore.chunks AS d WHERE d.family = $6 AND d.tsv @@ x.tq) AS df
                FROM (
                    SELECT DISTINCT ('''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''')::tsquery AS tq
                    FROM unnest(tsvector_to_array(to_tsvector($1, $2))) AS lexeme
                ) AS x
            ) AS l
            CROSS JOIN (SELECT greatest(count(*), 1)::float8 AS n FROM ragstore.chunks AS d WHERE d.family = $6) AS n
        ),
        m AS MATERIALIZED (
            SELECT CASE WHEN $5 THEN coalesce((SELECT string_agg(t.tq::text, ' | ') FROM terms AS t), '')::tsquery
                        ELSE q.strict END AS wide
            FROM q
        ),
        fts_top AS MATERIALIZED (
            SELECT c.chunk_id,
                   coalesce((SELECT sum(t.idf * CASE WHEN r.cd > 0 THEN 1.0 + r.cd / (r.cd + 1.0) ELSE 0.0 END)
                             FROM terms AS t
                             CROSS JOIN LATERAL (SELECT ts_rank_cd(c.tsv, t.tq, 2)::float8 AS cd) AS r), 0.0) AS score
            FROM m CROSS JOIN ragstore.chunks AS c
            JOIN ragstore.%1$I AS e
              ON e.family = c.family AND e.chunk_id = c.chunk_id AND e.content_sha256 = c.content_sha256
            WHERE c.family = $6 AND c.tsv @@ m.wide
            ORDER BY score DESC, c.chunk_id LIMIT 50
        ),
        fts AS (
            SELECT t.chunk_id, t.score,
                   row_number() OVER (ORDER BY t.score DESC, t.chunk_id) AS rank
            FROM fts_top AS t
        ),
        vec_top AS MATERIALIZED (
            SELECT e.chunk_id, (e.embedding <=> $3::%2$s)::float8 AS distance
            FROM ragstore.%1$I AS e ORDER BY e.embedding <=> $3::%2$s LIMIT 50
        ),
        vec AS (
            SELECT t.chunk_id, 1.0::float8 - t.distance AS score,
                   row_number() OVER (ORDER BY t.distance, t.chunk_id) AS rank
            FROM vec_top AS t
        ),
        fused AS (
            SELECT coalesce(f.chunk_id, v.chunk_id) AS chunk_id,
                   coalesce(1.0::float8 / (60 + f.rank), 0.0::float8)
                     + coalesce(1.0::float8 / (60 + v.rank), 0.0::float8) AS score,
                   f.rank AS fts_rank, f.score AS fts_score, v.rank AS vector_rank, v.score AS vector_score
            FROM fts AS f FULL OUTER JOIN vec AS v ON v.chunk_id = f.chunk_id
        )
        SELECT u.chunk_id, c.package_path, u.score, u.fts_rank, u.fts_score, u.vector_rank, u.vector_score, c.text
        FROM fused AS u
        JOIN ragstore.%1$I AS e ON e.chunk_id = u.chunk_id
        JOIN ragstore.chunks AS c
          ON c.family = e.family AND c.chunk_id = e.chunk_id AND c.content_sha256 = e.content_sha256
        ORDER BY u.score DESC, u.chunk_id
        LIMIT $4
    $q$, fam.table_name, fam.vector_type)
    USING config, query_text, query_vector, k, plain, fam.name;
END
$fn$;
COMMENT ON FUNCTION ragstore.hybrid_search(text, text, vector, integer) IS
    'ragstore hybrid search: full text + vector over the family''s chunks, each top 50, fused by RRF (k 60); ranks and scores per leg';
