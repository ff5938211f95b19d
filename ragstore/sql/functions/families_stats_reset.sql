-- ragstore.families_stats_reset, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- The full-text statistics (postings, word counts, ledger rows) of a family dropped or created are
-- deleted whole, by family, through each table's primary key or family index (EXECUTE: planned for the
-- names at hand), so a family re-created under an old name starts from nothing.
-- Called by: the statement triggers families_stats_drop and families_stats_create on ragstore.families.

CREATE OR REPLACE FUNCTION ragstore.families_stats_reset() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, ragstore, pg_temp AS $fn$
DECLARE
    names text[];
BEGIN
    IF TG_OP = 'DELETE' THEN
        SELECT array_agg(o.name) INTO names FROM old_rows AS o;
    ELSE
        SELECT array_agg(n.name) INTO names FROM new_rows AS n;
    END IF;
    IF names IS NULL THEN
        RETURN NULL;
    END IF;
    EXECUTE 'DELETE FROM ragstore.chunk_terms AS t WHERE t.family = ANY ($1)' USING names;
    EXECUTE 'DELETE FROM ragstore.chunk_term_df AS d WHERE d.family = ANY ($1)' USING names;
    EXECUTE 'DELETE FROM ragstore.family_chunk_deltas AS l WHERE l.family = ANY ($1)' USING names;
    RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION ragstore.families_stats_reset() IS
    'ragstore: deletes the full-text postings, word counts and ledger rows of a family dropped or created (trigger on ragstore.families)';
REVOKE ALL ON FUNCTION ragstore.families_stats_reset() FROM PUBLIC;
