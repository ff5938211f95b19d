-- ragstore.tsv_terms, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- The terms of one tsvector: each lexeme with its occurrences, the vector's length, and the length row ''.
-- Called by: everyone (the chunk triggers, ragstore/sql/ingest.sql).

CREATE OR REPLACE FUNCTION ragstore.tsv_terms(tsv tsvector) RETURNS TABLE (lexeme text, tf integer, dl integer)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    WITH t AS (SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf FROM unnest(tsv) AS u),
    n AS (SELECT coalesce(sum(t.tf), 0)::integer AS dl FROM t)
    SELECT t.lexeme, t.tf, n.dl FROM t CROSS JOIN n
    UNION ALL
    SELECT '', n.dl, n.dl FROM n
$fn$;
COMMENT ON FUNCTION ragstore.tsv_terms(tsvector) IS
    'ragstore: the (lexeme, occurrences, vector length) rows of a tsvector, plus its length row with lexeme ''''';
