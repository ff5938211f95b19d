-- Revision 0020: a chunk insert's postings, words' counts and ledger rows written by one statement.
--
-- The insert trigger (revision 0017) inserted the postings with RETURNING, grouped the returned rows per
-- word into three arrays, and passed them to ragstore.chunk_term_df_add, a second statement that unnests
-- them, sorts them again and upserts the counts, then looks for counts fallen to 0 (an insert never makes
-- one). The terms of the new rows (ragstore.tsv_terms of each tsv) are now materialized once and read by
-- the postings insert, the ledger insert and the counts' upsert, all parts of one statement; the counts
-- are still taken in (family, lexeme) order (GROUP BY, then ORDER BY the same key), so two writers of one
-- family that share words wait for each other as before and writers of different families never do.
-- What is stored is the same: the postings, ragstore.chunk_term_df and ragstore.family_chunk_deltas.
--
-- Measured on a bulk COPY of 100k chunks (about 700k postings and 100k distinct words, in 20 statements
-- of 5,000; benchmarks/ingest_server_profile.py): 0.5-2 s less server CPU of about 12 s (four alternated
-- pairs: 10.3 s against 12.2 s; what the counts and ledger add to the postings alone: 1.1-1.5 s against
-- 1.8-2.0 s). Most of what remains is inserting the postings into their primary key (4-5 s) and heap;
-- inserting them in key order halves the buffer reads but costs as much in the sort, and leaves a
-- larger index (pages split in half), so they go in as the chunks come.
--
-- The delete and text-change triggers keep chunk_term_df_add: their changes can be negative.

-- section: upgrade
CREATE OR REPLACE FUNCTION ragstore.chunks_count_inserted() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, ragstore AS $fn$
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

-- section: downgrade
-- The migration re-runs the definition this revision replaced, from 0017, the file that last defined it.
