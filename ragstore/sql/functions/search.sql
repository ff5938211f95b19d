-- ragstore.search, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- ragstore.search(family, query vector, k): top k of a family by cosine similarity, through its HNSW index.
-- The table name comes from ragstore.families and reaches SQL only through format('%I'); the column
-- type is vector/halfvec (a CHECK on ragstore.families) with the family's integer dimension. Only the
-- family's own chunks are read, and only where the row's content hash is the chunk's (the vector is the
-- embedding of the text returned). k is at most 1000, hnsw.ef_search's upper bound. A NULL query is refused.
-- Called by: everyone.

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
    -- The index is read in the family's storage (ragstore.family_index_order): its candidates, k or more
    -- for bit, are ordered by their exact distance and k kept.
    PERFORM set_config('hnsw.ef_search',
                       least(greatest(ragstore.family_index_candidates(fam, k), 100), 1000)::text, true);
    RETURN QUERY EXECUTE format(
        $q$
        WITH top AS MATERIALIZED (
            SELECT e.family, e.chunk_id, e.package_path, e.content_sha256, e.embedding <=> $1::%2$s AS distance
            FROM ragstore.%1$I AS e
            ORDER BY %3$s
            LIMIT $3
        )
        SELECT t.chunk_id, t.package_path,
               1 - CASE WHEN t.distance = 'NaN'::float8 THEN 1 ELSE t.distance END AS score,
               c.text
        FROM top AS t
        JOIN ragstore.chunks AS c
          ON c.family = t.family AND c.chunk_id = t.chunk_id AND c.content_sha256 = t.content_sha256
        ORDER BY score DESC, t.chunk_id
        LIMIT $2
        $q$,
        fam.table_name,
        format('%s(%s)', fam.vector_type, fam.dim::integer),
        ragstore.family_index_order(fam, '$1')
    ) USING query, k, ragstore.family_index_candidates(fam, k);
END
$fn$;
COMMENT ON FUNCTION ragstore.search(text, vector, integer) IS
    'ragstore: top k (1..1000) chunks of a family by cosine similarity (score = 1 - cosine distance, 0 for a zero vector)';
