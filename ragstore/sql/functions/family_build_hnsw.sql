-- ragstore.family_build_hnsw, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- A bulk load's index work (with family_bulk_drop_hnsw and family_bulk_cluster): build a family's
-- missing HNSW index, exactly as `ragstore family create` makes it. SECURITY DEFINER, owned by
-- ragstore_owner, so the app role can bulk-index without owning the table; the family is a NAME looked
-- up in the registry, which only the owner changes. The build takes the caller's maintenance_work_mem and
-- max_parallel_maintenance_workers (ragstore sizes them for the family's rows: ragstore/families/build_memory.py).
-- Called by: ragstore_app and the owner side (never the reader or PUBLIC).

CREATE OR REPLACE FUNCTION ragstore.family_build_hnsw(p_family text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    t    text;
    vt   text;
    d    integer;
    st   text;
    ext  text;
    expr text;
    ops  text;
BEGIN
    SELECT f.table_name, f.vector_type, f.dim, coalesce(f.options ->> 'storage', 'vector')
    INTO t, vt, d, st FROM ragstore.families f WHERE f.name = p_family;
    -- the operator class lives in pgvector's schema, which is not on this function's search_path
    SELECT n.nspname INTO ext FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'vector';
    IF t IS NULL THEN
        RAISE EXCEPTION USING MESSAGE = 'no family named ' || quote_literal(coalesce(p_family, '')),
            ERRCODE = 'undefined_object';
    END IF;
    IF to_regclass(format('ragstore.%I', t || '_embedding_hnsw')) IS NOT NULL THEN
        RETURN false;
    END IF;
    -- the family's storage (ragstore/families/storage.py writes the same expressions)
    IF st = 'halfvec' THEN
        expr := format('(embedding::%I.halfvec(%s))', ext, d);
        ops := 'halfvec_cosine_ops';
    ELSIF st = 'bit' THEN
        expr := format('(%I.binary_quantize(embedding)::bit(%s))', ext, d);
        ops := 'bit_hamming_ops';
    ELSE
        expr := 'embedding';
        ops := vt || '_cosine_ops';
    END IF;
    EXECUTE format('CREATE INDEX %I ON ragstore.%I USING hnsw (%s %I.%I) '
                   'WITH (m = 16, ef_construction = 128)',
                   t || '_embedding_hnsw', t, expr, ext, ops);
    RETURN true;
END
$fn$;
REVOKE ALL ON FUNCTION ragstore.family_build_hnsw(text) FROM PUBLIC;
