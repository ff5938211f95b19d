-- ragstore.hybrid_search, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- ragstore.hybrid_search(family, query_text, query_vector, k): full text (BM25) and vector over the
-- family's chunks, fused by the family's stored settings (option "fusion", written by `ragstore family
-- tune`; default convex combination, theoretical min-max, dense weight 0.8, 20 per leg): the statement
-- of ragstore/sql/hybrid.sql in one function (put in from that file, not copied). Refuses a NULL query
-- text or vector.
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
    plain   boolean;
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
    -- a query of plain words matches chunks holding any of them (ragstore.search.hybrid.plain_words)
    plain := query_text !~* '["'']|(^|\s)-\S|(^|\s)or(\s|$)';
    -- The statement of ragstore/sql/hybrid.sql, the one `ragstore search` runs, put in by `ragstore migrate`
    -- (ragstore/db/hybrid_text.py): the hybrid block with the function's arguments as $1..$19 (USING
    -- below) and the choices the library makes in Python made here: the candidates (plain words or
    -- websearch's strict meaning), the normalisation and the fusion.
    RETURN QUERY EXECUTE format($q$
        SELECT h.chunk_id, h.package_path, h.score, h.fts_rank, h.fts_score, h.vector_rank, h.vector_score, h.text
        FROM ( {{hybrid_statement}} ) AS h
        ORDER BY h.score DESC, h.chunk_id
    $q$, fam.table_name, format('%s(%s)', fam.vector_type, fam.dim::integer), ragstore.family_index_order(fam, '$3'),
        CASE WHEN plain THEN {{hybrid_block:candidates_any}} ELSE {{hybrid_block:candidates_all}} END,
        CASE fusion ->> 'normalization'
            WHEN 'minmax' THEN {{hybrid_block:norm_minmax}}
            WHEN 'zscore' THEN {{hybrid_block:norm_zscore}}
            ELSE {{hybrid_block:norm_tmm}}
        END,
        CASE WHEN fusion ->> 'fusion' = 'rrf' THEN {{hybrid_block:fuse_rrf}} ELSE {{hybrid_block:fuse_cc}} END)
    USING config, query_text, query_vector, k, fam.name, per_leg, fusion ->> 'fusion',
          fusion ->> 'normalization', (fusion ->> 'alpha')::float8, (fusion ->> 'rrf_k')::integer,
          plain, vector_norm(query_vector) > 0, ragstore.family_index_candidates(fam, per_leg),
          1.2::float8, 0.75::float8,
          least(greatest(ragstore.family_index_candidates(fam, per_leg), 100), 1000)::text, 'off'::text,
          1.0::float8, 1.0::float8;
END
$fn$;
COMMENT ON FUNCTION ragstore.hybrid_search(text, text, vector, integer) IS
    'ragstore hybrid search: full text (BM25) + vector over the family''s chunks fused by its stored settings (default convex combination, theoretical min-max, dense weight 0.8, 20 per leg); ranks and scores per leg';
