-- Revision 0017: each word's document frequency kept current, so BM25 reads the postings once; and
-- ragstore.hybrid_search in the shape of the statement `ragstore search` runs, 20 per leg.
--
-- 1. ragstore.chunk_term_df: per (family, lexeme) the number of the family's chunks holding the word (its
--    postings in ragstore.chunk_terms), kept by the same trigger functions that keep the postings, in the
--    same statement. ragstore.fts_scores read every posting of the query's words twice, once to count
--    each word's chunks and once to score them; it now reads the counts here (one row per word) and the
--    postings once. Writers add to a word's count with INSERT ... ON CONFLICT DO UPDATE, rows taken in
--    (family, lexeme) order within a statement. Two writers of the same family that hold a common word
--    wait for each other's commit (the count is one row); writers of different families never do. A
--    word whose count falls to 0 loses its row in the statement that removed its last posting.
-- 2. ragstore.hybrid_search (revision 0012) read the full-text postings twice (the full-text leg's BM25,
--    then again for the vector leg's chunks) and read every candidate's chunk and vector to fill in its
--    cosine. It now does what ragstore/sql/hybrid.sql does: BM25 once for every chunk holding a query
--    word; the full-text leg walks them best first and its probe (is the chunk served?) gives each
--    candidate's cosine; the vector leg's chunks take their BM25 score from the same list; the fused list
--    is walked best first, reading a chunk by key until k are found. Scores are rounded to 12 decimals as
--    there, and a zero query vector gives an empty vector leg (as there). The default depth per leg is 20
--    (the library's default, ragstore.search.fusion.FusionSettings): measured nDCG@10 equal to 50 per leg
--    within 0.0002 on three sets (README, "The default mode"), at a fraction of the probes.

-- section: upgrade
-- No write between the backfill below and the new trigger functions: writers wait for this migration's commit.
LOCK TABLE ragstore.chunks IN SHARE ROW EXCLUSIVE MODE;

CREATE TABLE ragstore.chunk_term_df (
    family text    NOT NULL,
    lexeme text    NOT NULL,
    df     integer NOT NULL,
    CONSTRAINT chunk_term_df_pkey PRIMARY KEY (family, lexeme) INCLUDE (df)
);
COMMENT ON TABLE ragstore.chunk_term_df IS
    'ragstore: per family and word, the number of the family''s chunks holding it (kept by the chunk triggers)';
INSERT INTO ragstore.chunk_term_df (family, lexeme, df)
SELECT t.family, t.lexeme, count(*) FROM ragstore.chunk_terms AS t WHERE t.lexeme <> '' GROUP BY t.family, t.lexeme;

-- ragstore.chunk_term_df_add(family, lexeme, change): add the changes (nonzero) to the words' counts in one
-- statement, rows taken in (family, lexeme) order, then drop the rows that fell to 0 (rows this statement
-- holds already). The caller passes one row per (family, lexeme).
CREATE FUNCTION ragstore.chunk_term_df_add(families text[], lexemes text[], changes bigint[]) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ragstore AS $fn$
BEGIN
    INSERT INTO ragstore.chunk_term_df AS d (family, lexeme, df)
    SELECT u.family, u.lexeme, u.change FROM unnest(families, lexemes, changes) AS u(family, lexeme, change)
    WHERE u.change <> 0
    ORDER BY u.family, u.lexeme
    ON CONFLICT (family, lexeme) DO UPDATE SET df = d.df + excluded.df;
    DELETE FROM ragstore.chunk_term_df AS d
    USING unnest(families, lexemes, changes) AS u(family, lexeme, change)
    WHERE u.change < 0 AND d.family = u.family AND d.lexeme = u.lexeme AND d.df <= 0;
END
$fn$;
REVOKE ALL ON FUNCTION ragstore.chunk_term_df_add(text[], text[], bigint[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION ragstore.chunks_count_inserted() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, ragstore AS $fn$
DECLARE
    fams text[];
    lexs text[];
    chgs bigint[];
BEGIN
    WITH added AS (
        INSERT INTO ragstore.chunk_terms (family, chunk_id, lexeme, tf, dl)
        SELECT n.family, n.chunk_id, t.lexeme, t.tf, t.dl
        FROM new_rows AS n CROSS JOIN LATERAL ragstore.tsv_terms(n.tsv) AS t
        RETURNING family, lexeme, tf
    ),
    ledger AS (
        INSERT INTO ragstore.family_chunk_deltas (family, delta, tokens)
        SELECT a.family, count(*), sum(a.tf) FROM added AS a WHERE a.lexeme = '' GROUP BY a.family
    )
    SELECT array_agg(c.family), array_agg(c.lexeme), array_agg(c.n) INTO fams, lexs, chgs
    FROM (SELECT a.family, a.lexeme, count(*) AS n FROM added AS a WHERE a.lexeme <> ''
          GROUP BY a.family, a.lexeme) AS c;
    PERFORM ragstore.chunk_term_df_add(fams, lexs, chgs) WHERE fams IS NOT NULL;
    RETURN NULL;
END
$fn$;

CREATE OR REPLACE FUNCTION ragstore.chunks_count_deleted() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, ragstore AS $fn$
DECLARE
    fams text[];
    lexs text[];
    chgs bigint[];
BEGIN
    WITH gone AS (
        DELETE FROM ragstore.chunk_terms AS t
        USING old_rows AS o WHERE t.family = o.family AND t.chunk_id = o.chunk_id
        RETURNING t.family, t.lexeme, t.tf
    ),
    ledger AS (
        INSERT INTO ragstore.family_chunk_deltas (family, delta, tokens)
        SELECT o.family, -count(*), -sum(t.tf) FROM old_rows AS o
        CROSS JOIN LATERAL ragstore.tsv_terms(o.tsv) AS t WHERE t.lexeme = '' GROUP BY o.family
    )
    SELECT array_agg(c.family), array_agg(c.lexeme), array_agg(c.n) INTO fams, lexs, chgs
    FROM (SELECT g.family, g.lexeme, -count(*) AS n FROM gone AS g WHERE g.lexeme <> ''
          GROUP BY g.family, g.lexeme) AS c;
    PERFORM ragstore.chunk_term_df_add(fams, lexs, chgs) WHERE fams IS NOT NULL;
    RETURN NULL;
END
$fn$;

-- A chunk whose text (so tsv) changed: its words' counts move by the difference between its old and its
-- new words, then its postings are replaced and the length difference goes to the ledger.
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
    DELETE FROM ragstore.chunk_terms AS t
    USING new_rows AS n JOIN old_rows AS o ON o.family = n.family AND o.chunk_id = n.chunk_id
    WHERE o.tsv IS DISTINCT FROM n.tsv AND t.family = n.family AND t.chunk_id = n.chunk_id;
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

CREATE OR REPLACE FUNCTION ragstore.chunks_count_truncated() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, ragstore AS $fn$
BEGIN
    -- DELETE, not TRUNCATE: a TRUNCATE of ragstore.chunks that names the postings too holds them in use.
    DELETE FROM ragstore.chunk_terms;
    DELETE FROM ragstore.chunk_term_df;
    DELETE FROM ragstore.family_chunk_deltas;
    RETURN NULL;
END
$fn$;

-- ragstore.fts_scores(family, config, query_text, k1, b): every chunk of the family holding a word of the
-- query, with its BM25 score, Σ over the words it holds of idf · tf · (k1 + 1) / (tf + k1 · (1 − b + b ·
-- dl / avgdl)), idf = ln(1 + (N − df + 0.5) / (df + 0.5)). df comes from ragstore.chunk_term_df, tf and dl
-- from ragstore.chunk_terms through its primary key (read once); N and avgdl from the family's ledger.
-- only_chunks, when given, keeps those chunks' scores alone (the df still count every chunk). The same
-- scores `ragstore search` computes (ragstore/sql/hybrid.sql calls this function).
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

CREATE OR REPLACE FUNCTION ragstore.hybrid_search(family text, query_text text, query_vector vector, k integer)
RETURNS TABLE (
    chunk_id     text,
    package_path text,
    score        float8,
    fts_rank     bigint,
    fts_score    float8,
    vector_rank  bigint,
    vector_score float8,
    text         text
)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET hnsw.ef_search = 100
AS $fn$
DECLARE
    fam     ragstore.families%ROWTYPE;
    config  regconfig;
    fusion  jsonb;
    per_leg integer;
BEGIN
    fam := ragstore.search_family('ragstore.hybrid_search', family, k);
    IF vector_dims(query_vector) <> fam.dim THEN
        RAISE EXCEPTION 'ragstore.hybrid_search: the query vector has % dimensions, family % holds %-d vectors',
            vector_dims(query_vector), family, fam.dim USING ERRCODE = 'data_exception';
    END IF;
    config := coalesce(fam.options ->> 'fts_config', 'english')::regconfig;
    fusion := '{"fusion": "cc", "normalization": "tmm", "alpha": 0.8, "per_leg": 20, "rrf_k": 60}'::jsonb
              || coalesce(fam.options -> 'fusion', '{}'::jsonb);
    per_leg := greatest(least((fusion ->> 'per_leg')::integer, 1000), k);
    PERFORM set_config('hnsw.ef_search', least(greatest(per_leg, 100), 1000)::text, true);
    RETURN QUERY EXECUTE format($q$
        WITH bm25 AS MATERIALIZED (
            SELECT s.chunk_id, round(s.score * 1e12::float8) / 1e12::float8 AS score
            FROM ragstore.fts_scores($5, $1, $2) AS s
        ),
        candidates AS (
            SELECT b.chunk_id, b.score FROM bm25 AS b WHERE $11
            UNION ALL
            SELECT c.chunk_id, coalesce(b.score, 0.0::float8)
            FROM ragstore.chunks AS c LEFT JOIN bm25 AS b ON b.chunk_id = c.chunk_id
            WHERE NOT $11 AND c.family = $5 AND c.tsv @@ websearch_to_tsquery($1, $2)
        ),
        fts_top AS MATERIALIZED (
            SELECT f.chunk_id, f.score, served.cosine
            FROM (SELECT x.chunk_id, x.score FROM candidates AS x ORDER BY x.score DESC, x.chunk_id) AS f
            CROSS JOIN LATERAL (
                SELECT CASE WHEN $12
                            THEN coalesce(nullif(1.0::float8 - (e.embedding <=> $3::%2$s), 'NaN'::float8), 0.0::float8)
                            ELSE 0.0::float8 END AS cosine
                FROM ragstore.chunks AS c
                JOIN ragstore.%1$I AS e
                  ON e.family = c.family AND e.chunk_id = c.chunk_id AND e.content_sha256 = c.content_sha256
                WHERE c.family = $5 AND c.chunk_id = f.chunk_id
                LIMIT 1
            ) AS served
            ORDER BY f.score DESC, f.chunk_id
            LIMIT $6
        ),
        fts AS MATERIALIZED (
            SELECT t.chunk_id, t.score, t.cosine, row_number() OVER (ORDER BY t.score DESC, t.chunk_id) AS rank
            FROM fts_top AS t
        ),
        vec_top AS MATERIALIZED (
            SELECT e.chunk_id, (e.embedding <=> $3::%2$s)::float8 AS distance
            FROM ragstore.%1$I AS e WHERE $12 ORDER BY e.embedding <=> $3::%2$s LIMIT $6
        ),
        vec AS MATERIALIZED (
            SELECT t.chunk_id, 1.0::float8 - t.distance AS score,
                   row_number() OVER (ORDER BY t.distance, t.chunk_id) AS rank
            FROM vec_top AS t
        ),
        stats AS MATERIALIZED (
            SELECT f.lo AS f_min, f.hi AS f_max, f.mean AS f_mean, f.sd AS f_sd,
                   v.lo AS v_min, v.hi AS v_max, v.mean AS v_mean, v.sd AS v_sd
            FROM (SELECT min(s.score) AS lo, max(s.score) AS hi, avg(s.score) AS mean, stddev_pop(s.score) AS sd
                  FROM fts AS s) AS f
            CROSS JOIN (SELECT min(s.score) AS lo, max(s.score) AS hi, avg(s.score) AS mean,
                               stddev_pop(s.score) AS sd FROM vec AS s) AS v
        ),
        pool AS MATERIALIZED (
            SELECT coalesce(f.chunk_id, v.chunk_id) AS chunk_id,
                   f.rank AS fts_rank, f.score AS fts_score, v.rank AS vector_rank, v.score AS vector_score,
                   f.cosine AS fts_cosine
            FROM fts AS f FULL OUTER JOIN vec AS v ON v.chunk_id = f.chunk_id
        ),
        pool_bm25 AS MATERIALIZED (
            SELECT b.chunk_id, b.score FROM bm25 AS b WHERE b.chunk_id IN (SELECT p.chunk_id FROM pool AS p)
        ),
        filled AS MATERIALIZED (
            SELECT p.chunk_id, p.fts_rank, p.fts_score, p.vector_rank, p.vector_score,
                   coalesce(p.vector_score, p.fts_cosine) AS cosine,
                   coalesce(p.fts_score, b.score, 0.0::float8) AS lexical
            FROM pool AS p LEFT JOIN pool_bm25 AS b ON b.chunk_id = p.chunk_id
        ),
        normed AS (
            SELECT x.*,
                   CASE $8
                       WHEN 'minmax' THEN coalesce((x.cosine - s.v_min) / nullif(s.v_max - s.v_min, 0.0),
                                                   CASE WHEN x.cosine >= s.v_max THEN 1.0 ELSE 0.0 END)
                       WHEN 'zscore' THEN coalesce((x.cosine - s.v_mean) / nullif(s.v_sd, 0.0), 0.0)
                       ELSE coalesce((x.cosine + 1.0) / nullif(s.v_max + 1.0, 0.0), 0.0)
                   END::float8 AS v_norm,
                   CASE $8
                       WHEN 'minmax' THEN coalesce((x.lexical - s.f_min) / nullif(s.f_max - s.f_min, 0.0),
                                                   CASE WHEN x.lexical >= s.f_max THEN 1.0 ELSE 0.0 END)
                       WHEN 'zscore' THEN coalesce((x.lexical - s.f_mean) / nullif(s.f_sd, 0.0), 0.0)
                       ELSE coalesce(x.lexical / nullif(s.f_max, 0.0), 0.0)
                   END::float8 AS f_norm
            FROM filled AS x CROSS JOIN stats AS s
        ),
        fused AS (
            SELECT n.*,
                   CASE WHEN $7 = 'rrf'
                        THEN coalesce(1.0::float8 / ($10 + n.fts_rank), 0.0::float8)
                             + coalesce(1.0::float8 / ($10 + n.vector_rank), 0.0::float8)
                        ELSE $9 * n.v_norm + (1.0::float8 - $9) * n.f_norm
                   END AS fused_score
            FROM normed AS n
        )
        SELECT u.chunk_id, h.package_path, u.fused_score, u.fts_rank, u.fts_score, u.vector_rank, u.vector_score,
               h.text
        FROM (SELECT w.* FROM fused AS w ORDER BY w.fused_score DESC, w.chunk_id) AS u
        CROSS JOIN LATERAL (
            SELECT c.package_path, c.text
            FROM ragstore.%1$I AS e
            JOIN ragstore.chunks AS c
              ON c.family = e.family AND c.chunk_id = e.chunk_id AND c.content_sha256 = e.content_sha256
            WHERE e.chunk_id = u.chunk_id
        ) AS h
        ORDER BY u.fused_score DESC, u.chunk_id
        LIMIT $4
    $q$, fam.table_name, format('%s(%s)', fam.vector_type, fam.dim::integer))
    USING config, query_text, query_vector, k, fam.name, per_leg, fusion ->> 'fusion',
          fusion ->> 'normalization', (fusion ->> 'alpha')::float8, (fusion ->> 'rrf_k')::integer,
          query_text !~* '["'']|(^|\s)-\S|(^|\s)or(\s|$)', vector_norm(query_vector) > 0;
END
$fn$;
COMMENT ON FUNCTION ragstore.hybrid_search(text, text, vector, integer) IS
    'ragstore hybrid search: full text (BM25) + vector over the family''s chunks fused by its stored settings (default convex combination, theoretical min-max, dense weight 0.8, 20 per leg); ranks and scores per leg';

DO $grants$
BEGIN
    IF (SELECT count(*) FROM pg_roles
        WHERE rolname IN ('ragstore_owner', 'ragstore_app', 'ragstore_reader')) < 3 THEN
        RAISE NOTICE 'ragstore: the ragstore roles are missing; ask a DBA to run sql/roles.sql, then migrate again';
        RETURN;
    END IF;
    GRANT SELECT ON ragstore.chunk_term_df TO ragstore_app, ragstore_reader;
    ALTER TABLE ragstore.chunk_term_df OWNER TO ragstore_owner;
    ALTER FUNCTION ragstore.chunk_term_df_add(text[], text[], bigint[]) OWNER TO ragstore_owner;
END
$grants$;

-- section: downgrade
-- Then the migration re-runs the definitions this revision replaced, from the frozen files that last
-- defined each (0012: fts_scores, chunks_count_inserted, chunks_terms_updated, hybrid_search; 0016:
-- chunks_count_deleted, chunks_count_truncated).
DROP FUNCTION ragstore.chunk_term_df_add(text[], text[], bigint[]);
DROP TABLE ragstore.chunk_term_df
