-- Revision 0018: the full-text postings with one index, their primary key.
--
-- Every posting written cost two btree insertions: the primary key chunk_terms_pkey (family, lexeme,
-- chunk_id) INCLUDE (tf, dl), which BM25 reads, and chunk_terms_chunk_idx (family, chunk_id), which only the
-- delete and text-change triggers used, to find a chunk's postings by its id. A chunk's postings are
-- exactly ragstore.tsv_terms(tsv) of its stored row (the length row '' included): the insert trigger writes
-- those, the text-change trigger replaces them whenever tsv changes, and tsv is a stored generated column
-- (nothing else changes it). The delete and text-change triggers have the old row, so its tsv, in their
-- transition table old_rows: they now delete ragstore.tsv_terms(old tsv) of each chunk through the primary
-- key, the same set the insert trigger wrote, and the second index is dropped. Deleting ALL postings
-- (the truncate trigger) never needed it.
--
-- The terms are materialized first, then joined to the key. That delete runs by EXECUTE, so it is planned
-- at each call for the rows it deletes: a plan kept from a session's first, large delete (a hash join
-- reading every posting) would otherwise serve its later deletes of one chunk too. The delete trigger takes
-- the chunk count and length for the ledger from the length rows it deleted, as the insert trigger takes
-- them from those it wrote.

-- section: upgrade
CREATE OR REPLACE FUNCTION ragstore.chunks_count_deleted() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, ragstore AS $fn$
DECLARE
    fams text[];
    lexs text[];
    chgs bigint[];
BEGIN
    EXECUTE $q$
        WITH terms AS MATERIALIZED (
            SELECT o.family, o.chunk_id, u.lexeme
            FROM old_rows AS o CROSS JOIN LATERAL ragstore.tsv_terms(o.tsv) AS u
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
    PERFORM ragstore.chunk_term_df_add(fams, lexs, chgs) WHERE fams IS NOT NULL;
    RETURN NULL;
END
$fn$;

-- A chunk whose text (so tsv) changed: its words' counts move by the difference between its old and its
-- new words, then its old postings (tsv_terms of the old tsv) are replaced by its new ones and the length
-- difference goes to the ledger.
CREATE OR REPLACE FUNCTION ragstore.chunks_terms_updated() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, ragstore AS $fn$
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
    PERFORM ragstore.chunk_term_df_add(fams, lexs, chgs) WHERE fams IS NOT NULL;
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

DROP INDEX ragstore.chunk_terms_chunk_idx;

-- section: downgrade
-- Then the migration re-runs the definitions of the two trigger functions from 0017, the file that last
-- defined them.
CREATE INDEX chunk_terms_chunk_idx ON ragstore.chunk_terms (family, chunk_id)
