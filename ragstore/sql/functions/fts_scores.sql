-- ragstore.fts_scores, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- ragstore.fts_scores(family, config, query_text, k1, b): every chunk of the family holding a word of the
-- query, with its BM25 score, Σ over the words it holds of idf · tf · (k1 + 1) / (tf + k1 · (1 − b + b ·
-- dl / avgdl)), idf = ln(1 + (N − df + 0.5) / (df + 0.5)). df comes from ragstore.chunk_term_df, tf and dl
-- from ragstore.chunk_terms through its primary key (read once); N and avgdl from the family's ledger.
-- only_chunks, when given, keeps those chunks' scores alone (the df still count every chunk). The same
-- scores `ragstore search` computes (ragstore/sql/hybrid.sql calls this function). The arithmetic is the
-- blocks bm25_weights and bm25_sum of ragstore/sql/hybrid.sql, put in where marked ({{hybrid_inline:...}},
-- ragstore/db/hybrid_text.py), which the Citus statement (hybrid_citus.sql) runs too.
-- Called by: everyone (ragstore/sql/hybrid.sql and the search functions).

CREATE OR REPLACE FUNCTION ragstore.fts_scores(family text, config regconfig, query_text text, k1 float8 DEFAULT 1.2,
                                               b float8 DEFAULT 0.75, only_chunks text[] DEFAULT NULL)
RETURNS TABLE (chunk_id text, score float8)
LANGUAGE sql STABLE PARALLEL SAFE AS $fn$
    WITH bm25_corpus AS MATERIALIZED (
        SELECT greatest(coalesce(sum(d.delta), 0), 1)::float8 AS n,
               greatest(coalesce(sum(d.tokens), 0), 1)::float8 / greatest(coalesce(sum(d.delta), 0), 1)::float8
                 AS avgdl
        FROM ragstore.family_chunk_deltas AS d WHERE d.family = fts_scores.family
    ),
    bm25_df AS MATERIALIZED (
        SELECT t.lexeme, t.df
        FROM ragstore.chunk_term_df AS t
        WHERE t.family = fts_scores.family
          AND t.lexeme = ANY (ARRAY(SELECT DISTINCT w FROM unnest(tsvector_to_array(to_tsvector(config, query_text))) AS w))
    ),
    bm25_weights AS MATERIALIZED ({{hybrid_inline:bm25_weights}}),
    bm25_postings AS (
        SELECT t.chunk_id, t.lexeme, t.tf, t.dl
        FROM ragstore.chunk_terms AS t
        WHERE t.family = fts_scores.family AND (only_chunks IS NULL OR t.chunk_id = ANY (only_chunks))
    )
    {{hybrid_inline:bm25_sum}}
$fn$;
COMMENT ON FUNCTION ragstore.fts_scores(text, regconfig, text, float8, float8, text[]) IS
    'ragstore: BM25 score of every chunk of the family holding a word of the query (postings in ragstore.chunk_terms, document frequencies in ragstore.chunk_term_df)';
