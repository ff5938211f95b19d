-- ragstore.fts_scores, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- ragstore.fts_scores(family, config, query_text, k1, b): every chunk of the family holding a word of the
-- query, with its BM25 score, Σ over the words it holds of idf · tf · (k1 + 1) / (tf + k1 · (1 − b + b ·
-- dl / avgdl)), idf = ln(1 + (N − df + 0.5) / (df + 0.5)). df comes from ragstore.chunk_term_df, tf and dl
-- from ragstore.chunk_terms through its primary key (read once); N and avgdl from the family's ledger.
-- only_chunks, when given, keeps those chunks' scores alone (the df still count every chunk). The same
-- scores `ragstore search` computes (ragstore/sql/hybrid.sql calls this function).
-- Called by: everyone (ragstore/sql/hybrid.sql and the search functions).

CREATE OR REPLACE FUNCTION ragstore.fts_scores(family text, config regconfig, query_text text, k1 float8 DEFAULT 1.2,
                                               b float8 DEFAULT 0.75, only_chunks text[] DEFAULT NULL)
RETURNS TABLE (chunk_id text, score float8)
LANGUAGE sql STABLE PARALLEL SAFE AS $fn$
    WITH corpus AS MATERIALIZED (
        SELECT greatest(coalesce(sum(d.delta), 0), 1)::float8 AS n,
               greatest(coalesce(sum(d.tokens), 0), 1)::float8 / greatest(coalesce(sum(d.delta), 0), 1)::float8
                 AS avgdl
        FROM ragstore.family_chunk_deltas AS d WHERE d.family = fts_scores.family
    ),
    weights AS MATERIALIZED (
        SELECT t.lexeme,
               ln(1.0::float8 + (s.n - t.df + 0.5::float8) / (t.df + 0.5::float8)) * (k1 + 1.0::float8) AS w,
               k1 * (1.0::float8 - b) AS c0,
               k1 * b / s.avgdl AS c1
        FROM ragstore.chunk_term_df AS t
        CROSS JOIN corpus AS s
        WHERE t.family = fts_scores.family
          AND t.lexeme = ANY (ARRAY(SELECT DISTINCT w FROM unnest(tsvector_to_array(to_tsvector(config, query_text))) AS w))
        GROUP BY t.lexeme, t.df, s.n, s.avgdl
    )
    SELECT t.chunk_id, sum(w.w * t.tf / (t.tf + w.c0 + w.c1 * t.dl))
    FROM weights AS w
    JOIN ragstore.chunk_terms AS t ON t.family = fts_scores.family AND t.lexeme = w.lexeme
    WHERE only_chunks IS NULL OR t.chunk_id = ANY (only_chunks)
    GROUP BY t.chunk_id
$fn$;
COMMENT ON FUNCTION ragstore.fts_scores(text, regconfig, text, float8, float8, text[]) IS
    'ragstore: BM25 score of every chunk of the family holding a word of the query (postings in ragstore.chunk_terms, document frequencies in ragstore.chunk_term_df)';
