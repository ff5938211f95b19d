-- ragstore.family_index_candidates, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- How many rows a search reads from a family's HNSW index for k hits: k, or for the bit storage k × the
-- family's rerank factor (options ->> 'rerank_factor', 1..100, default 10 as in ragstore/families/
-- storage.py), capped at 1,000 (hnsw.ef_search's bound) and never under k. The search functions re-rank
-- those candidates exactly by the full vectors' cosine and keep k.
-- Called by: ragstore.search, ragstore.hybrid_search (everyone may).

CREATE OR REPLACE FUNCTION ragstore.family_index_candidates(fam ragstore.families, k integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
SELECT CASE WHEN coalesce(fam.options ->> 'storage', 'vector') <> 'bit' THEN k
            ELSE greatest(k, least(k * CASE WHEN jsonb_typeof(fam.options -> 'rerank_factor') = 'number'
                                                 AND (fam.options ->> 'rerank_factor') ~ '^[0-9]{1,3}$'
                                                 AND (fam.options ->> 'rerank_factor')::integer BETWEEN 1 AND 100
                                            THEN (fam.options ->> 'rerank_factor')::integer ELSE 10 END,
                                   1000))
       END
$fn$;
COMMENT ON FUNCTION ragstore.family_index_candidates(ragstore.families, integer) IS
    'ragstore: how many rows a search reads from a family''s HNSW index for k hits (k x rerank factor for bit)';
