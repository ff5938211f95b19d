-- ragstore.fts_search, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- ragstore.fts_search(family, query_text, k): the full-text leg alone (BM25), over the family's own chunks.
-- Called by: everyone.

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
