-- ragstore.family_bulk_cluster, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- A bulk load's index work: rewrite a family table in package order and analyze it, while its HNSW
-- index is missing. SECURITY DEFINER (see family_build_hnsw.sql); CLUSTER sorts in the caller's
-- maintenance_work_mem (ragstore sizes it for the table: ragstore/families/build_memory.py).
-- Called by: ragstore_app and the owner side (never the reader or PUBLIC).

CREATE OR REPLACE FUNCTION ragstore.family_bulk_cluster(p_family text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    t text;
BEGIN
    SELECT f.table_name INTO t FROM ragstore.families f WHERE f.name = p_family;
    IF t IS NULL THEN
        RAISE EXCEPTION USING MESSAGE = 'no family named ' || quote_literal(coalesce(p_family, '')),
            ERRCODE = 'undefined_object';
    END IF;
    IF to_regclass(format('ragstore.%I', t || '_embedding_hnsw')) IS NOT NULL
       OR to_regclass(format('ragstore.%I', t || '_package_path')) IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('CLUSTER ragstore.%I USING %I', t, t || '_package_path');
    EXECUTE format('ANALYZE ragstore.%I', t);
    RETURN true;
END
$fn$;
REVOKE ALL ON FUNCTION ragstore.family_bulk_cluster(text) FROM PUBLIC;
