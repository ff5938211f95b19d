-- ragstore.fts_top, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- ragstore.fts_top(family, query_text, k): the family's top k chunks by BM25 that the family serves
-- (a vector row of the chunk's current text); refuses a NULL query.
-- Called by: everyone (ragstore.fts_search, ragstore.search_auto).

CREATE OR REPLACE FUNCTION ragstore.fts_top(family text, query_text text, k integer)
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
