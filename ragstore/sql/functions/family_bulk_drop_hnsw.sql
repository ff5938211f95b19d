-- ragstore.family_bulk_drop_hnsw, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- A bulk load's index work: drop the HNSW index of a family whose table is empty (under the table's
-- lock). SECURITY DEFINER (see family_build_hnsw.sql).
-- Called by: ragstore_app and the owner side (never the reader or PUBLIC).

CREATE OR REPLACE FUNCTION ragstore.family_bulk_drop_hnsw(p_family text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    t      text;
    filled boolean;
BEGIN
    SELECT f.table_name INTO t FROM ragstore.families f WHERE f.name = p_family;
    IF t IS NULL THEN
        RAISE EXCEPTION USING MESSAGE = 'no family named ' || quote_literal(coalesce(p_family, '')),
            ERRCODE = 'undefined_object';
    END IF;
    IF to_regclass(format('ragstore.%I', t || '_embedding_hnsw')) IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('LOCK TABLE ragstore.%I IN ACCESS EXCLUSIVE MODE', t);
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM ragstore.%I)', t) INTO filled;
    IF filled THEN
        RETURN false;
    END IF;
    EXECUTE format('DROP INDEX ragstore.%I', t || '_embedding_hnsw');
    RETURN true;
END
$fn$;
REVOKE ALL ON FUNCTION ragstore.family_bulk_drop_hnsw(text) FROM PUBLIC;
