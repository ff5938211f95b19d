-- SQL for people: the search functions, as migrations 0007 and 0021 (a NULL query refused) define them
-- (migrations/versions/sql/0007_family_chunks.sql and 0021_definer_audit.sql; first created by 0002).
-- Apply with `ragstore migrate`; this copy is for reading and for DBAs who apply DDL by hand
-- (tests/unit/test_sql_copies.py checks that it is the migration's text).
--
-- Each function reads the named family's own chunks only: a chunk_id another family also holds is
-- another row, with its own text and vector, never returned here.

-- ragstore.search(family, query vector, k): top k of a family by cosine similarity, through its HNSW index.
-- The table name comes from ragstore.families and reaches SQL only through format('%I'); the column
-- type is vector/halfvec (a CHECK on ragstore.families) with the family's integer dimension. Only the
-- family's own chunks are read, and only where the row's content hash is the chunk's (the vector is the
-- embedding of the text returned). k is at most 1000, hnsw.ef_search's upper bound.
CREATE OR REPLACE FUNCTION ragstore.search(family text, query vector, k integer DEFAULT 10)
RETURNS TABLE (chunk_id text, package_path text, score double precision, text text)
LANGUAGE plpgsql STABLE
SET hnsw.ef_search = '100'
AS $fn$
DECLARE
    fam ragstore.families%ROWTYPE;
BEGIN
    IF k IS NULL OR k < 1 OR k > 1000 THEN
        RAISE EXCEPTION 'ragstore.search: k must be an integer from 1 to 1000, got %', k
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO fam FROM ragstore.families AS f WHERE f.name = family;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'ragstore.search: no family named % (see SELECT name FROM ragstore.families)',
            quote_literal(family) USING ERRCODE = 'undefined_object';
    END IF;
    IF query IS NULL THEN
        RAISE EXCEPTION 'ragstore.search: the query vector is NULL (give a vector of the family''s dimension)'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF vector_dims(query) <> fam.dim THEN
        RAISE EXCEPTION 'ragstore.search: the query has % dimensions, family % holds %-d vectors',
            vector_dims(query), quote_literal(family), fam.dim USING ERRCODE = 'data_exception';
    END IF;
    -- hnsw.ef_search >= k, within pgvector's 1..1000; the SET clause restores the caller's value on return.
    PERFORM set_config('hnsw.ef_search', least(greatest(k, 100), 1000)::text, true);
    RETURN QUERY EXECUTE format(
        $q$
        WITH top AS MATERIALIZED (
            SELECT e.family, e.chunk_id, e.package_path, e.content_sha256, e.embedding <=> $1::%2$s AS distance
            FROM ragstore.%1$I AS e
            ORDER BY e.embedding <=> $1::%2$s
            LIMIT $2
        )
        SELECT t.chunk_id, t.package_path,
               1 - CASE WHEN t.distance = 'NaN'::float8 THEN 1 ELSE t.distance END AS score,
               c.text
        FROM top AS t
        JOIN ragstore.chunks AS c
          ON c.family = t.family AND c.chunk_id = t.chunk_id AND c.content_sha256 = t.content_sha256
        ORDER BY score DESC, t.chunk_id
        $q$,
        fam.table_name,
        format('%s(%s)', fam.vector_type, fam.dim::integer)
    ) USING query, k;
END
$fn$;
COMMENT ON FUNCTION ragstore.search(text, vector, integer) IS
    'ragstore: top k (1..1000) chunks of a family by cosine similarity (score = 1 - cosine distance, 0 for a zero vector)';

-- ragstore.search_text(family, query text, k): the same for an offline family, embedding the query in SQL.
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
