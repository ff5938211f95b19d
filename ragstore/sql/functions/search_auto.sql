-- ragstore.search_auto, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- ragstore.search_auto(family, query_text, query_vector, k): the family's default search mode, as
-- `ragstore search` runs it: full text for an offline family (its vectors are fingerprints); hybrid for a
-- semantic family given the query text and its vector (SQL cannot run the model: embed the query in the
-- application); HNSW when only a vector is given.
-- Called by: everyone.

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
