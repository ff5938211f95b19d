-- ragstore.chunks_terms_updated, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- A chunk whose text (so tsv) changed: its words' counts move by the difference between its old and its
-- new words (rows taken in (family, lexeme) order), then its old postings (tsv_terms of the old tsv) are
-- replaced by its new ones and the length difference goes to the ledger.
-- Called by: the statement trigger chunks_terms_update on ragstore.chunks.

CREATE OR REPLACE FUNCTION ragstore.chunks_terms_updated() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, ragstore, pg_temp AS $fn$
DECLARE
    fams text[];
    lexs text[];
    chgs bigint[];
BEGIN
    SELECT array_agg(c.family), array_agg(c.lexeme), array_agg(c.n) INTO fams, lexs, chgs
    FROM (
        SELECT w.family, w.lexeme, sum(w.sign) AS n
        FROM (
            SELECT n.family, u.lexeme, 1 AS sign
            FROM new_rows AS n JOIN old_rows AS o ON o.family = n.family AND o.chunk_id = n.chunk_id
            CROSS JOIN LATERAL unnest(tsvector_to_array(n.tsv)) AS u(lexeme)
            WHERE o.tsv IS DISTINCT FROM n.tsv
            UNION ALL
            SELECT o.family, u.lexeme, -1
            FROM new_rows AS n JOIN old_rows AS o ON o.family = n.family AND o.chunk_id = n.chunk_id
            CROSS JOIN LATERAL unnest(tsvector_to_array(o.tsv)) AS u(lexeme)
            WHERE o.tsv IS DISTINCT FROM n.tsv
        ) AS w
        GROUP BY w.family, w.lexeme
    ) AS c;
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
    EXECUTE $q$
        WITH terms AS MATERIALIZED (
            SELECT o.family, o.chunk_id, u.lexeme
            FROM new_rows AS n JOIN old_rows AS o ON o.family = n.family AND o.chunk_id = n.chunk_id
            CROSS JOIN LATERAL ragstore.tsv_terms(o.tsv) AS u
            WHERE o.tsv IS DISTINCT FROM n.tsv
        )
        DELETE FROM ragstore.chunk_terms AS t
        USING terms AS k WHERE t.family = k.family AND t.lexeme = k.lexeme AND t.chunk_id = k.chunk_id
    $q$;
    INSERT INTO ragstore.chunk_terms (family, chunk_id, lexeme, tf, dl)
    SELECT n.family, n.chunk_id, t.lexeme, t.tf, t.dl
    FROM new_rows AS n JOIN old_rows AS o ON o.family = n.family AND o.chunk_id = n.chunk_id
    CROSS JOIN LATERAL ragstore.tsv_terms(n.tsv) AS t
    WHERE o.tsv IS DISTINCT FROM n.tsv;
    INSERT INTO ragstore.family_chunk_deltas (family, delta, tokens)
    SELECT n.family, 0, sum(nt.tf - ot.tf)
    FROM new_rows AS n JOIN old_rows AS o ON o.family = n.family AND o.chunk_id = n.chunk_id
    CROSS JOIN LATERAL ragstore.tsv_terms(n.tsv) AS nt
    CROSS JOIN LATERAL ragstore.tsv_terms(o.tsv) AS ot
    WHERE o.tsv IS DISTINCT FROM n.tsv AND nt.lexeme = '' AND ot.lexeme = ''
    GROUP BY n.family;
    RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION ragstore.chunks_terms_updated() FROM PUBLIC;
