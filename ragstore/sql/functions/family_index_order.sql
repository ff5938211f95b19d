-- ragstore.family_index_order, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- The distance a family's HNSW index serves, as SQL text for the search functions' format(): the family
-- row e's embedding against the query placeholder q (a constant such as '$1' written by the caller),
-- both as the index holds them, by the family's storage (options ->> 'storage'; ragstore/families/
-- storage.py writes the same expressions): the column itself (vector), its halfvec cast, or its binary
-- code by Hamming distance (bit). Built from the registry row only: the dimension is an integer and the
-- vector type a CHECKed keyword; a storage it does not know reads as vector, as the Python side does.
-- Called by: ragstore.search, ragstore.hybrid_search (everyone may).

CREATE OR REPLACE FUNCTION ragstore.family_index_order(fam ragstore.families, q text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
SELECT CASE coalesce(fam.options ->> 'storage', 'vector')
    WHEN 'halfvec' THEN format('(e.embedding::halfvec(%1$s)) <=> %2$s::halfvec(%1$s)', fam.dim::integer, q)
    WHEN 'bit' THEN format('(binary_quantize(e.embedding)::bit(%1$s)) <~> binary_quantize(%2$s::%3$s(%1$s))::bit(%1$s)',
                           fam.dim::integer, q, fam.vector_type)
    ELSE format('e.embedding <=> %2$s::%3$s(%1$s)', fam.dim::integer, q, fam.vector_type)
END
$fn$;
COMMENT ON FUNCTION ragstore.family_index_order(ragstore.families, text) IS
    'ragstore: the ORDER BY distance a family''s HNSW index serves (by its storage: vector, halfvec or bit)';
