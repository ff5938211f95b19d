-- Revision 0012: BM25 full text from precomputed term statistics.
--
-- 1. ragstore.chunk_terms: one row per (family, lexeme, chunk) of every chunk's tsv, with the lexeme's
--    number of occurrences in the chunk (tf) and the chunk's length (dl, its lexeme occurrences), plus one
--    row per chunk with the empty lexeme '' (tf = dl) that counts chunks and their lengths where no
--    ledger is kept (Citus). The primary key (family, lexeme, chunk_id) INCLUDE (tf, dl) serves a query's
--    words by an index-only scan; a word's document frequency is its number of rows.
-- 2. ragstore.family_chunk_deltas gains tokens: sum(tokens) is the family's total chunk length, so the
--    average length BM25 needs is read from the ledger like the chunk count.
-- 3. The triggers on ragstore.chunks keep both: an insert adds its chunks' terms, a text change
--    replaces them, a delete removes them (foreign key, ON DELETE CASCADE).
-- 4. ragstore.fts_scores (BM25 of every chunk holding a query word, k1 1.2 and b 0.75 by default) and
--    ragstore.fts_top (the top k the family serves) are the full-text leg of ragstore.fts_search and
--    ragstore.hybrid_search; ragstore/sql/hybrid.sql (the CLI's statement) calls fts_scores too.

-- section: upgrade
-- No write between the backfill below and the triggers: writers wait for this migration's commit.
LOCK TABLE ragstore.chunks IN SHARE ROW EXCLUSIVE MODE;

-- The terms of one tsvector: each lexeme with its occurrences, the vector's length, and the length row ''.
CREATE FUNCTION ragstore.tsv_terms(tsv tsvector) RETURNS TABLE (lexeme text, tf integer, dl integer)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    WITH t AS (SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf FROM unnest(tsv) AS u),
    n AS (SELECT coalesce(sum(t.tf), 0)::integer AS dl FROM t)
    SELECT t.lexeme, t.tf, n.dl FROM t CROSS JOIN n
    UNION ALL
    SELECT '', n.dl, n.dl FROM n
$fn$;
COMMENT ON FUNCTION ragstore.tsv_terms(tsvector) IS
    'ragstore: the (lexeme, occurrences, vector length) rows of a tsvector, plus its length row with lexeme ''''';

CREATE TABLE ragstore.chunk_terms (
    family   text    NOT NULL,
    chunk_id text    NOT NULL,
    lexeme   text    NOT NULL,
    tf       integer NOT NULL,
    dl       integer NOT NULL,
    CONSTRAINT chunk_terms_pkey PRIMARY KEY (family, lexeme, chunk_id) INCLUDE (tf, dl),
    CONSTRAINT chunk_terms_chunk_fkey FOREIGN KEY (family, chunk_id)
        REFERENCES ragstore.chunks (family, chunk_id) ON DELETE CASCADE
);
CREATE INDEX chunk_terms_chunk_idx ON ragstore.chunk_terms (family, chunk_id);
COMMENT ON TABLE ragstore.chunk_terms IS
    'ragstore: full-text postings (family, lexeme, chunk_id, tf, dl) of every chunk; lexeme '''' is the chunk''s length row';
INSERT INTO ragstore.chunk_terms (family, chunk_id, lexeme, tf, dl)
SELECT c.family, c.chunk_id, t.lexeme, t.tf, t.dl
FROM ragstore.chunks AS c CROSS JOIN LATERAL ragstore.tsv_terms(c.tsv) AS t;

ALTER TABLE ragstore.family_chunk_deltas ADD COLUMN tokens bigint NOT NULL DEFAULT 0;
COMMENT ON TABLE ragstore.family_chunk_deltas IS
    'ragstore: chunks (delta) and lexeme occurrences (tokens) added (+) or removed (-) per family and write statement';
INSERT INTO ragstore.family_chunk_deltas (family, delta, tokens)
SELECT t.family, 0, sum(t.tf) FROM ragstore.chunk_terms AS t WHERE t.lexeme = '' GROUP BY t.family;

CREATE OR REPLACE FUNCTION ragstore.chunks_count_inserted() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, ragstore AS $fn$
BEGIN
    INSERT INTO ragstore.chunk_terms (family, chunk_id, lexeme, tf, dl)
    SELECT n.family, n.chunk_id, t.lexeme, t.tf, t.dl FROM new_rows AS n CROSS JOIN LATERAL ragstore.tsv_terms(n.tsv) AS t;
    INSERT INTO ragstore.family_chunk_deltas (family, delta, tokens)
    SELECT n.family, count(*), sum(t.tf) FROM new_rows AS n
    CROSS JOIN LATERAL ragstore.tsv_terms(n.tsv) AS t WHERE t.lexeme = '' GROUP BY n.family;
    RETURN NULL;
END
$fn$;
CREATE OR REPLACE FUNCTION ragstore.chunks_count_deleted() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, ragstore AS $fn$
BEGIN
    INSERT INTO ragstore.family_chunk_deltas (family, delta, tokens)
    SELECT o.family, -count(*), -sum(t.tf) FROM old_rows AS o
    CROSS JOIN LATERAL ragstore.tsv_terms(o.tsv) AS t WHERE t.lexeme = '' GROUP BY o.family;
    RETURN NULL;
END
$fn$;
-- A chunk whose text (so tsv) changed gets its terms replaced and the length difference in the ledger.
CREATE FUNCTION ragstore.chunks_terms_updated() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, ragstore AS $fn$
BEGIN
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
CREATE TRIGGER chunks_terms_update AFTER UPDATE ON ragstore.chunks
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION ragstore.chunks_terms_updated();
REVOKE ALL ON FUNCTION ragstore.chunks_terms_updated() FROM PUBLIC;

-- ragstore.fts_scores(family, config, query_text, k1, b): every chunk of the family holding a word of the
-- query, with its BM25 score, Σ over the words it holds of idf · tf · (k1 + 1) / (tf + k1 · (1 − b + b ·
-- dl / avgdl)), idf = ln(1 + (N − df + 0.5) / (df + 0.5)). tf, dl and df (a word's rows) come from
-- ragstore.chunk_terms through its primary key; N and avgdl from the family's ledger. only_chunks, when
-- given, keeps those chunks' scores alone (the df still count every chunk). The same scores `ragstore
-- search` computes (ragstore/sql/hybrid.sql calls this function).
CREATE FUNCTION ragstore.fts_scores(family text, config regconfig, query_text text, k1 float8 DEFAULT 1.2,
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
               ln(1.0::float8 + (s.n - count(*) + 0.5::float8) / (count(*) + 0.5::float8)) * (k1 + 1.0::float8) AS w,
               k1 * (1.0::float8 - b) AS c0,
               k1 * b / s.avgdl AS c1
        FROM ragstore.chunk_terms AS t
        CROSS JOIN corpus AS s
        WHERE t.family = fts_scores.family
          AND t.lexeme = ANY (ARRAY(SELECT DISTINCT w FROM unnest(tsvector_to_array(to_tsvector(config, query_text))) AS w))
        GROUP BY t.lexeme, s.n, s.avgdl
    )
    SELECT t.chunk_id, sum(w.w * t.tf / (t.tf + w.c0 + w.c1 * t.dl))
    FROM weights AS w
    JOIN ragstore.chunk_terms AS t ON t.family = fts_scores.family AND t.lexeme = w.lexeme
    WHERE only_chunks IS NULL OR t.chunk_id = ANY (only_chunks)
    GROUP BY t.chunk_id
$fn$;
COMMENT ON FUNCTION ragstore.fts_scores(text, regconfig, text, float8, float8, text[]) IS
    'ragstore: BM25 score of every chunk of the family holding a word of the query (postings in ragstore.chunk_terms)';

-- ragstore.search_family(caller, family, k): the family's registry row for a search function named
-- caller, after checking k (1 to 1000) and that the family exists; one message shape for every caller.
CREATE FUNCTION ragstore.search_family(caller text, family text, k integer) RETURNS ragstore.families
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $fn$
DECLARE
    fam ragstore.families%ROWTYPE;
BEGIN
    IF k IS NULL OR k < 1 OR k > 1000 THEN
        RAISE EXCEPTION '%: k must be an integer from 1 to 1000, got %', caller, k
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO fam FROM ragstore.families AS f WHERE f.name = search_family.family;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: no family named %', caller, family USING ERRCODE = 'undefined_object';
    END IF;
    RETURN fam;
END
$fn$;
COMMENT ON FUNCTION ragstore.search_family(text, text, integer) IS
    'ragstore: a search function''s family row, after checking k (1 to 1000) and that the family exists';

-- ragstore.fts_top(family, query_text, k): the family's top k chunks by BM25 (chunk_id, score), chunk_id
-- breaking ties; only chunks the family serves (its vector embeds the current text). A query of plain
-- words matches chunks holding any of them; quotes, "or" and -exclusions keep websearch_to_tsquery's strict
-- meaning (those chunks, 0 when they hold none of the words). The full-text leg of both functions below.
CREATE FUNCTION ragstore.fts_top(family text, query_text text, k integer)
RETURNS TABLE (chunk_id text, score float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $fn$
DECLARE
    fam    ragstore.families%ROWTYPE;
    config regconfig;
BEGIN
    fam := ragstore.search_family('ragstore.fts_top', family, k);
    config := coalesce(fam.options ->> 'fts_config', 'english')::regconfig;
    RETURN QUERY EXECUTE format($q$
        WITH bm25 AS MATERIALIZED (SELECT s.chunk_id, s.score FROM ragstore.fts_scores($3, $1, $2) AS s),
        candidates AS (
            SELECT b.chunk_id, b.score FROM bm25 AS b WHERE $5
            UNION ALL
            SELECT c.chunk_id, coalesce(b.score, 0.0::float8)
            FROM ragstore.chunks AS c LEFT JOIN bm25 AS b ON b.chunk_id = c.chunk_id
            WHERE NOT $5 AND c.family = $3 AND c.tsv @@ websearch_to_tsquery($1, $2)
        )
        SELECT f.chunk_id, f.score
        FROM (SELECT x.chunk_id, x.score FROM candidates AS x ORDER BY x.score DESC, x.chunk_id) AS f
        CROSS JOIN LATERAL (
            SELECT 1 FROM ragstore.chunks AS c
            JOIN ragstore.%1$I AS e
              ON e.family = c.family AND e.chunk_id = c.chunk_id AND e.content_sha256 = c.content_sha256
            WHERE c.family = $3 AND c.chunk_id = f.chunk_id
            LIMIT 1
        ) AS served
        ORDER BY f.score DESC, f.chunk_id
        LIMIT $4
    $q$, fam.table_name)
    USING config, query_text, fam.name, k, query_text !~* '["'']|(^|\s)-\S|(^|\s)or(\s|$)';
END
$fn$;
COMMENT ON FUNCTION ragstore.fts_top(text, text, integer) IS
    'ragstore: the family''s top k chunks by BM25 (plain words match any; websearch operators keep their meaning)';

-- ragstore.hybrid_search(family, query_text, query_vector, k): full text (BM25) + vector over the family's
-- own chunks, fused by the family's stored settings (default: convex combination of cosine and BM25
-- scores, each by theoretical min-max, dense weight 0.8, each leg's top 50). k is at most 1000.
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
    fusion := '{"fusion": "cc", "normalization": "tmm", "alpha": 0.8, "per_leg": 50, "rrf_k": 60}'::jsonb
              || coalesce(fam.options -> 'fusion', '{}'::jsonb);
    per_leg := greatest(least((fusion ->> 'per_leg')::integer, 1000), k);
    PERFORM set_config('hnsw.ef_search', least(greatest(per_leg, 100), 1000)::text, true);
    RETURN QUERY EXECUTE format($q$
        WITH fts AS MATERIALIZED (
            SELECT t.chunk_id, t.score, row_number() OVER (ORDER BY t.score DESC, t.chunk_id) AS rank
            FROM ragstore.fts_top($5, $2, $6) AS t
        ),
        vec_top AS MATERIALIZED (
            SELECT e.chunk_id, (e.embedding <=> $3::%2$s)::float8 AS distance
            FROM ragstore.%1$I AS e ORDER BY e.embedding <=> $3::%2$s LIMIT $6
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
                   f.rank AS fts_rank, f.score AS fts_score, v.rank AS vector_rank, v.score AS vector_score
            FROM fts AS f FULL OUTER JOIN vec AS v ON v.chunk_id = f.chunk_id
        ),
        pool_bm25 AS MATERIALIZED (
            SELECT b.chunk_id, b.score
            FROM ragstore.fts_scores($5, $1, $2, 1.2, 0.75,
                                     ARRAY(SELECT p.chunk_id FROM pool AS p WHERE p.fts_rank IS NULL)) AS b
        ),
        filled AS MATERIALIZED (
            SELECT p.*,
                   coalesce(p.vector_score,
                            coalesce(nullif(1.0::float8 - (e.embedding <=> $3::%2$s), 'NaN'::float8), 0.0::float8))
                     AS cosine,
                   coalesce(p.fts_score, b.score, 0.0::float8) AS lexical
            FROM pool AS p
            JOIN ragstore.%1$I AS e ON e.chunk_id = p.chunk_id
            JOIN ragstore.chunks AS c
              ON c.family = e.family AND c.chunk_id = e.chunk_id AND c.content_sha256 = e.content_sha256
            LEFT JOIN pool_bm25 AS b ON b.chunk_id = p.chunk_id
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
        SELECT u.chunk_id, c.package_path, u.fused_score, u.fts_rank, u.fts_score, u.vector_rank, u.vector_score,
               c.text
        FROM (SELECT * FROM fused ORDER BY fused_score DESC, chunk_id LIMIT $4) AS u
        JOIN ragstore.chunks AS c ON c.family = $5 AND c.chunk_id = u.chunk_id
        ORDER BY u.fused_score DESC, u.chunk_id
    $q$, fam.table_name, format('%s(%s)', fam.vector_type, fam.dim::integer))
    USING config, query_text, query_vector, k, fam.name, per_leg, fusion ->> 'fusion',
          fusion ->> 'normalization', (fusion ->> 'alpha')::float8, (fusion ->> 'rrf_k')::integer;
END
$fn$;
COMMENT ON FUNCTION ragstore.hybrid_search(text, text, vector, integer) IS
    'ragstore hybrid search: full text (BM25) + vector over the family''s chunks fused by its stored settings (default convex combination, theoretical min-max, dense weight 0.8, 50 per leg); ranks and scores per leg';

-- ragstore.fts_search(family, query_text, k): the full-text leg alone (BM25), over the family's own chunks.
CREATE OR REPLACE FUNCTION ragstore.fts_search(family text, query_text text, k integer DEFAULT 10)
RETURNS TABLE (chunk_id text, package_path text, score float8, text text)
LANGUAGE sql STABLE PARALLEL SAFE
AS $fn$
    SELECT t.chunk_id, c.package_path, t.score, c.text
    FROM ragstore.fts_top(fts_search.family, fts_search.query_text, fts_search.k) AS t
    JOIN ragstore.chunks AS c ON c.family = fts_search.family AND c.chunk_id = t.chunk_id
    ORDER BY t.score DESC, t.chunk_id
$fn$;
COMMENT ON FUNCTION ragstore.fts_search(text, text, integer) IS
    'ragstore full-text search over the family''s own chunks (BM25 k1 1.2, b 0.75; plain words match any)';
DO $grants$
BEGIN
    IF (SELECT count(*) FROM pg_roles
        WHERE rolname IN ('ragstore_owner', 'ragstore_app', 'ragstore_reader')) < 3 THEN
        RAISE NOTICE 'ragstore: the ragstore roles are missing; ask a DBA to run sql/roles.sql, then migrate again';
        RETURN;
    END IF;
    GRANT SELECT ON ragstore.chunk_terms TO ragstore_app, ragstore_reader;
    ALTER TABLE ragstore.chunk_terms OWNER TO ragstore_owner;
    ALTER FUNCTION ragstore.tsv_terms(tsvector) OWNER TO ragstore_owner;
    ALTER FUNCTION ragstore.chunks_terms_updated() OWNER TO ragstore_owner;
    ALTER FUNCTION ragstore.fts_scores(text, regconfig, text, float8, float8, text[]) OWNER TO ragstore_owner;
    ALTER FUNCTION ragstore.fts_top(text, text, integer) OWNER TO ragstore_owner;
    ALTER FUNCTION ragstore.search_family(text, text, integer) OWNER TO ragstore_owner;
    GRANT EXECUTE ON FUNCTION ragstore.fts_scores(text, regconfig, text, float8, float8, text[]),
        ragstore.fts_top(text, text, integer), ragstore.search_family(text, text, integer)
        TO ragstore_app, ragstore_reader;
END
$grants$;

-- section: downgrade
-- Then the migration re-runs 0010's definitions of the two search functions and of the count trigger functions.
DROP FUNCTION IF EXISTS ragstore.fts_top(text, text, integer);
DROP FUNCTION IF EXISTS ragstore.fts_scores(text, regconfig, text, float8, float8, text[]);
DROP FUNCTION IF EXISTS ragstore.search_family(text, text, integer);
DROP TRIGGER chunks_terms_update ON ragstore.chunks;
DROP FUNCTION ragstore.chunks_terms_updated();
DROP TABLE ragstore.chunk_terms;
DROP FUNCTION ragstore.tsv_terms(tsvector);
DELETE FROM ragstore.family_chunk_deltas WHERE delta = 0;
ALTER TABLE ragstore.family_chunk_deltas DROP COLUMN tokens;
COMMENT ON TABLE ragstore.family_chunk_deltas IS
    'ragstore: chunks added (+) or removed (-) per family and write statement; sum(delta) is the family''s chunk count'
