-- ragstore.search_text, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- ragstore.search_text(family, query text, k): the same for an offline family, embedding the query in SQL.
-- Called by: everyone.

CREATE OR REPLACE FUNCTION ragstore.search_text(family text, query text, k integer DEFAULT 10)
RETURNS TABLE (chunk_id text, package_path text, score double precision, text text)
LANGUAGE plpgsql STABLE
AS $fn$
DECLARE
    fam ragstore.families%ROWTYPE;
BEGIN
    SELECT * INTO fam FROM ragstore.families AS f WHERE f.name = family;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'ragstore.search_text: no family named % (see SELECT name FROM ragstore.families)',
            quote_literal(family) USING ERRCODE = 'undefined_object';
    END IF;
    IF fam.backend <> 'offline' THEN
        RAISE EXCEPTION 'ragstore.search_text: family % uses the % backend, which SQL cannot run; embed the '
            'query in your application and call ragstore.search(family, vector, k)', quote_literal(family),
            fam.backend USING ERRCODE = 'feature_not_supported';
    END IF;
    IF query IS NULL OR btrim(query) = '' THEN
        RAISE EXCEPTION 'ragstore.search_text: the query text is empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY SELECT * FROM ragstore.search(family, ragstore.offline_embed(query), k);
END
$fn$;
COMMENT ON FUNCTION ragstore.search_text(text, text, integer) IS
    'ragstore: search an offline family with a text query, embedded by ragstore.offline_embed';
