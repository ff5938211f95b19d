-- ragstore.chunks_count_inserted, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- A statement that inserted chunks: their postings (ragstore.tsv_terms of each new tsv), the words'
-- document frequencies and the ledger rows (chunk count and length per family) are written by one
-- statement over the new rows' terms, materialized once; counts are taken in (family, lexeme) order.
-- Called by: the statement trigger chunks_count_insert on ragstore.chunks.

CREATE OR REPLACE FUNCTION ragstore.chunks_count_inserted() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, ragstore, pg_temp AS $fn$
BEGIN
    WITH terms AS MATERIALIZED (
        SELECT n.family, n.chunk_id, t.lexeme, t.tf, t.dl
        FROM new_rows AS n CROSS JOIN LATERAL ragstore.tsv_terms(n.tsv) AS t
    ),
    added AS (
        INSERT INTO ragstore.chunk_terms (family, chunk_id, lexeme, tf, dl)
        SELECT t.family, t.chunk_id, t.lexeme, t.tf, t.dl FROM terms AS t
    ),
    ledger AS (
        INSERT INTO ragstore.family_chunk_deltas (family, delta, tokens)
        SELECT t.family, count(*), sum(t.tf) FROM terms AS t WHERE t.lexeme = '' GROUP BY t.family
    )
    INSERT INTO ragstore.chunk_term_df AS d (family, lexeme, df)
    SELECT t.family, t.lexeme, count(*) FROM terms AS t WHERE t.lexeme <> ''
    GROUP BY t.family, t.lexeme
    ORDER BY t.family, t.lexeme
    ON CONFLICT (family, lexeme) DO UPDATE SET df = d.df + excluded.df;
    RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION ragstore.chunks_count_inserted() FROM PUBLIC;
