-- ragstore.chunks_count_truncated, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- A TRUNCATE of ragstore.chunks empties the full-text statistics with it.
-- Called by: the statement trigger chunks_count_truncate on ragstore.chunks.

CREATE OR REPLACE FUNCTION ragstore.chunks_count_truncated() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, ragstore, pg_temp AS $fn$
BEGIN
    -- DELETE, not TRUNCATE: a TRUNCATE of ragstore.chunks that names the postings too holds them in use.
    DELETE FROM ragstore.chunk_terms;
    DELETE FROM ragstore.chunk_term_df;
    DELETE FROM ragstore.family_chunk_deltas;
    RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION ragstore.chunks_count_truncated() FROM PUBLIC;
