-- ragstore.chunks_count_deleted, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- A statement that deleted chunks: the postings of each deleted chunk (the terms of its old tsv) are
-- deleted through the primary key, the ledger gets the chunk count and length removed, and the words'
-- counts are lowered by the postings deleted, rows taken in (family, lexeme) order; a count that falls to
-- 0 loses its row. Chunks whose family is no longer registered (dropped, the delete cascading from
-- ragstore.families) are skipped: ragstore.families_stats_reset removes that family's rows whole.
-- Called by: the statement trigger chunks_count_delete on ragstore.chunks.

CREATE OR REPLACE FUNCTION ragstore.chunks_count_deleted() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, ragstore, pg_temp AS $fn$
DECLARE
    fams text[];
    lexs text[];
    chgs bigint[];
BEGIN
    EXECUTE $q$
        WITH terms AS MATERIALIZED (
            SELECT o.family, o.chunk_id, u.lexeme
            FROM old_rows AS o CROSS JOIN LATERAL ragstore.tsv_terms(o.tsv) AS u
            WHERE EXISTS (SELECT 1 FROM ragstore.families AS f WHERE f.name = o.family)
        ),
        gone AS (
            DELETE FROM ragstore.chunk_terms AS t
            USING terms AS k WHERE t.family = k.family AND t.lexeme = k.lexeme AND t.chunk_id = k.chunk_id
            RETURNING t.family, t.lexeme, t.tf
        ),
        ledger AS (
            INSERT INTO ragstore.family_chunk_deltas (family, delta, tokens)
            SELECT g.family, -count(*), -sum(g.tf) FROM gone AS g WHERE g.lexeme = '' GROUP BY g.family
        )
        SELECT array_agg(c.family), array_agg(c.lexeme), array_agg(c.n)
        FROM (SELECT g.family, g.lexeme, -count(*) AS n FROM gone AS g WHERE g.lexeme <> ''
              GROUP BY g.family, g.lexeme) AS c
    $q$ INTO fams, lexs, chgs;
    IF fams IS NOT NULL THEN
        INSERT INTO ragstore.chunk_term_df AS d (family, lexeme, df)
        SELECT u.family, u.lexeme, u.change FROM unnest(fams, lexs, chgs) AS u(family, lexeme, change)
        WHERE u.change <> 0
        ORDER BY u.family, u.lexeme
        ON CONFLICT (family, lexeme) DO UPDATE SET df = d.df + excluded.df;
        DELETE FROM ragstore.chunk_term_df AS d
        USING unnest(fams, lexs, chgs) AS u(family, lexeme, change)
        WHERE u.change < 0 AND d.family = u.family AND d.lexeme = u.lexeme AND d.df <= 0;
    END IF;
    RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION ragstore.chunks_count_deleted() FROM PUBLIC;
