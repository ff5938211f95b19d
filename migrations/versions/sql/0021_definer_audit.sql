-- Revision 0021: every SECURITY DEFINER function audited; the full-text statistics written by the chunk
-- triggers alone and removed whole with their family; a family dropped in bulk; the search functions
-- refuse a NULL query.
--
-- 1. Who may write the statistics BM25 reads (ragstore.chunk_terms, ragstore.chunk_term_df,
--    ragstore.family_chunk_deltas). ragstore.chunk_term_df_add(families, lexemes, changes) (revision 0017)
--    was a SECURITY DEFINER function that added any change to any word's count; the default privileges of
--    revision 0004 gave EXECUTE on it to ragstore_app and ragstore_reader, so the reader could rewrite a
--    word's document frequency and the app could set it to any number. Its body now lives in the two
--    trigger functions that called it and the function is gone: a count changes only by the postings a
--    chunk statement actually inserted or deleted. The app also held INSERT, UPDATE and DELETE on the
--    three tables (revision 0004's grant on all tables); it keeps SELECT only. No role but the owner may
--    execute the trigger functions (a trigger fires whoever writes the chunks; nobody calls them).
-- 2. Every SECURITY DEFINER function pins search_path to pg_catalog (and ragstore where it names
--    unqualified objects of it) with pg_temp last, so a temporary object of the caller's never stands in
--    for a catalog or ragstore object.
-- 3. A family's statistics go with it. ragstore.families_stats_reset() (AFTER DELETE and AFTER INSERT on
--    ragstore.families, statement level) deletes every posting, count and ledger row under the name of a
--    family dropped or created: a family re-created under an old name starts from nothing, whatever
--    rows were left under that name. The chunk delete trigger skips the chunks of families no longer
--    registered (those removed by the ON DELETE CASCADE from ragstore.families), whose postings the
--    statement trigger on ragstore.families then deletes by family through the primary key, instead
--    of one lookup per posting and one count update per word. The counts and ledger already stored are
--    recomputed once from the postings, so a count changed before this revision does not survive it.
-- 4. ragstore.search, ragstore.hybrid_search and ragstore.fts_top (so ragstore.fts_search) refuse a NULL
--    query vector or text (null_value_not_allowed) instead of returning rows without a score.
--
-- On Citus the chunk triggers are dropped when ragstore.chunks is distributed (ragstore/sql/citus.sql) and
-- the triggers on ragstore.families before it becomes a reference table; where it is one already, they
-- are not created here.

-- section: upgrade
-- No chunk write between the redefinitions below and this migration's commit.
LOCK TABLE ragstore.chunks IN SHARE ROW EXCLUSIVE MODE;

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

-- A statement that deleted chunks: the postings of each deleted chunk (the terms of its old tsv) are
-- deleted through the primary key, the ledger gets the chunk count and length removed, and the words'
-- counts are lowered by the postings deleted, rows taken in (family, lexeme) order; a count that falls to
-- 0 loses its row. Chunks whose family is no longer registered (dropped, the delete cascading from
-- ragstore.families) are skipped: ragstore.families_stats_reset removes that family's rows whole.
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

-- A chunk whose text (so tsv) changed: its words' counts move by the difference between its old and its
-- new words (rows taken in (family, lexeme) order), then its old postings (tsv_terms of the old tsv) are
-- replaced by its new ones and the length difference goes to the ledger.
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

CREATE OR REPLACE FUNCTION ragstore.chunks_count_truncated() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, ragstore, pg_temp AS $fn$
BEGIN
    -- DELETE, not TRUNCATE: a TRUNCATE of ragstore.chunks that names the postings too holds them in use.
    DELETE FROM ragstore.chunk_terms;
    DELETE FROM ragstore.chunk_term_df;
    DELETE FROM ragstore.family_chunk_deltas;
    RETURN NULL;
END
$fn$;

DROP FUNCTION IF EXISTS ragstore.chunk_term_df_add(text[], text[], bigint[]);

-- ragstore.families_stats_reset(): the statistics of a family dropped or created are deleted whole, by
-- family, through each table's primary key or family index (EXECUTE: planned for the names at hand).
CREATE OR REPLACE FUNCTION ragstore.families_stats_reset() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, ragstore, pg_temp AS $fn$
DECLARE
    names text[];
BEGIN
    IF TG_OP = 'DELETE' THEN
        SELECT array_agg(o.name) INTO names FROM old_rows AS o;
    ELSE
        SELECT array_agg(n.name) INTO names FROM new_rows AS n;
    END IF;
    IF names IS NULL THEN
        RETURN NULL;
    END IF;
    EXECUTE 'DELETE FROM ragstore.chunk_terms AS t WHERE t.family = ANY ($1)' USING names;
    EXECUTE 'DELETE FROM ragstore.chunk_term_df AS d WHERE d.family = ANY ($1)' USING names;
    EXECUTE 'DELETE FROM ragstore.family_chunk_deltas AS l WHERE l.family = ANY ($1)' USING names;
    RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION ragstore.families_stats_reset() IS
    'ragstore: deletes the full-text postings, word counts and ledger rows of a family dropped or created (trigger on ragstore.families)';

DO $triggers$
DECLARE
    on_citus boolean := false;
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition '
                'WHERE logicalrelid = ''ragstore.families''::regclass)' INTO on_citus;
    END IF;
    DROP TRIGGER IF EXISTS families_stats_drop ON ragstore.families;
    DROP TRIGGER IF EXISTS families_stats_create ON ragstore.families;
    IF NOT on_citus THEN
        CREATE TRIGGER families_stats_drop AFTER DELETE ON ragstore.families
            REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION ragstore.families_stats_reset();
        CREATE TRIGGER families_stats_create AFTER INSERT ON ragstore.families
            REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ragstore.families_stats_reset();
    END IF;
    -- The counts and the ledger recomputed from the postings (where the chunk triggers keep them), and
    -- the rows of names no family holds deleted.
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_trigger
               WHERE tgrelid = 'ragstore.chunks'::regclass AND tgname = 'chunks_count_insert') THEN
        DELETE FROM ragstore.chunk_terms AS t
        WHERE NOT EXISTS (SELECT 1 FROM ragstore.families AS f WHERE f.name = t.family);
        DELETE FROM ragstore.chunk_term_df;
        INSERT INTO ragstore.chunk_term_df (family, lexeme, df)
        SELECT t.family, t.lexeme, count(*) FROM ragstore.chunk_terms AS t WHERE t.lexeme <> ''
        GROUP BY t.family, t.lexeme ORDER BY t.family, t.lexeme;
        DELETE FROM ragstore.family_chunk_deltas;
        INSERT INTO ragstore.family_chunk_deltas (family, delta, tokens)
        SELECT t.family, count(*), coalesce(sum(t.tf), 0) FROM ragstore.chunk_terms AS t WHERE t.lexeme = ''
        GROUP BY t.family;
    END IF;
END
$triggers$;

-- The bulk-load functions of revision 0008, with pg_temp last on their search_path.
CREATE OR REPLACE FUNCTION ragstore.family_bulk_drop_hnsw(p_family text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    t      text;
    filled boolean;
BEGIN
    SELECT f.table_name INTO t FROM ragstore.families f WHERE f.name = p_family;
    IF t IS NULL THEN
        RAISE EXCEPTION USING MESSAGE = 'no family named ' || quote_literal(coalesce(p_family, '')),
            ERRCODE = 'undefined_object';
    END IF;
    IF to_regclass(format('ragstore.%I', t || '_embedding_hnsw')) IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('LOCK TABLE ragstore.%I IN ACCESS EXCLUSIVE MODE', t);
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM ragstore.%I)', t) INTO filled;
    IF filled THEN
        RETURN false;
    END IF;
    EXECUTE format('DROP INDEX ragstore.%I', t || '_embedding_hnsw');
    RETURN true;
END
$fn$;

CREATE OR REPLACE FUNCTION ragstore.family_bulk_cluster(p_family text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET maintenance_work_mem = '1GB' AS $fn$
DECLARE
    t text;
BEGIN
    SELECT f.table_name INTO t FROM ragstore.families f WHERE f.name = p_family;
    IF t IS NULL THEN
        RAISE EXCEPTION USING MESSAGE = 'no family named ' || quote_literal(coalesce(p_family, '')),
            ERRCODE = 'undefined_object';
    END IF;
    IF to_regclass(format('ragstore.%I', t || '_embedding_hnsw')) IS NOT NULL
       OR to_regclass(format('ragstore.%I', t || '_package_path')) IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('CLUSTER ragstore.%I USING %I', t, t || '_package_path');
    EXECUTE format('ANALYZE ragstore.%I', t);
    RETURN true;
END
$fn$;

CREATE OR REPLACE FUNCTION ragstore.family_build_hnsw(p_family text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET maintenance_work_mem = '1GB' AS $fn$
DECLARE
    t   text;
    vt  text;
    ext text;
BEGIN
    SELECT f.table_name, f.vector_type INTO t, vt FROM ragstore.families f WHERE f.name = p_family;
    -- the operator class lives in pgvector's schema, which is not on this function's search_path
    SELECT n.nspname INTO ext FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'vector';
    IF t IS NULL THEN
        RAISE EXCEPTION USING MESSAGE = 'no family named ' || quote_literal(coalesce(p_family, '')),
            ERRCODE = 'undefined_object';
    END IF;
    IF to_regclass(format('ragstore.%I', t || '_embedding_hnsw')) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE INDEX %I ON ragstore.%I USING hnsw (embedding %I.%I) '
                   'WITH (m = 16, ef_construction = 128)',
                   t || '_embedding_hnsw', t, ext, vt || '_cosine_ops');
    RETURN true;
END
$fn$;

-- The search functions refuse a NULL query (the rest as revisions 0007, 0017 and 0012 defined them).
CREATE OR REPLACE FUNCTION ragstore.search(family text, query vector, k integer DEFAULT 10)
RETURNS TABLE (chunk_id text, package_path text, score double precision, text text)
LANGUAGE plpgsql STABLE
SET hnsw.ef_search = '100'
AS $fn$
DECLARE
    fam ragstore.families%ROWTYPE;
BEGIN
    IF k IS NULL OR k < 1 OR k > 1000 THEN
        RAISE EXCEPTION 'ragstore.search: k must be an integer from 1 to 1000, got %', k
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO fam FROM ragstore.families AS f WHERE f.name = family;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'ragstore.search: no family named % (see SELECT name FROM ragstore.families)',
            quote_literal(family) USING ERRCODE = 'undefined_object';
    END IF;
    IF query IS NULL THEN
        RAISE EXCEPTION 'ragstore.search: the query vector is NULL (give a vector of the family''s dimension)'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF vector_dims(query) <> fam.dim THEN
        RAISE EXCEPTION 'ragstore.search: the query has % dimensions, family % holds %-d vectors',
            vector_dims(query), quote_literal(family), fam.dim USING ERRCODE = 'data_exception';
    END IF;
    -- hnsw.ef_search >= k, within pgvector's 1..1000; the SET clause restores the caller's value on return.
    PERFORM set_config('hnsw.ef_search', least(greatest(k, 100), 1000)::text, true);
    RETURN QUERY EXECUTE format(
        $q$
        WITH top AS MATERIALIZED (
            SELECT e.family, e.chunk_id, e.package_path, e.content_sha256, e.embedding <=> $1::%2$s AS distance
            FROM ragstore.%1$I AS e
            ORDER BY e.embedding <=> $1::%2$s
            LIMIT $2
        )
        SELECT t.chunk_id, t.package_path,
               1 - CASE WHEN t.distance = 'NaN'::float8 THEN 1 ELSE t.distance END AS score,
               c.text
        FROM top AS t
        JOIN ragstore.chunks AS c
          ON c.family = t.family AND c.chunk_id = t.chunk_id AND c.content_sha256 = t.content_sha256
        ORDER BY score DESC, t.chunk_id
        $q$,
        fam.table_name,
        format('%s(%s)', fam.vector_type, fam.dim::integer)
    ) USING query, k;
END
$fn$;
COMMENT ON FUNCTION ragstore.search(text, vector, integer) IS
    'ragstore: top k (1..1000) chunks of a family by cosine similarity (score = 1 - cosine distance, 0 for a zero vector)';

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
    IF query_text IS NULL THEN
        RAISE EXCEPTION 'ragstore.hybrid_search: the query text is NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF query_vector IS NULL THEN
        RAISE EXCEPTION 'ragstore.hybrid_search: the query vector is NULL (give a vector of the family''s dimension)'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
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

CREATE OR REPLACE FUNCTION ragstore.fts_top(family text, query_text text, k integer)
RETURNS TABLE (chunk_id text, score float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $fn$
DECLARE
    fam    ragstore.families%ROWTYPE;
    config regconfig;
BEGIN
    fam := ragstore.search_family('ragstore.fts_top', family, k);
    IF query_text IS NULL THEN
        RAISE EXCEPTION 'ragstore.fts_top: the query text is NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
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

REVOKE ALL ON FUNCTION ragstore.chunks_count_inserted(), ragstore.chunks_count_deleted(),
    ragstore.chunks_terms_updated(), ragstore.chunks_count_truncated(), ragstore.families_stats_reset(),
    ragstore.family_bulk_drop_hnsw(text), ragstore.family_bulk_cluster(text), ragstore.family_build_hnsw(text)
    FROM PUBLIC;

-- Ownership and grants (skipped with a NOTICE when the three roles are missing; see sql/roles.sql).
DO $grants$
BEGIN
    IF (SELECT count(*) FROM pg_roles
        WHERE rolname IN ('ragstore_owner', 'ragstore_app', 'ragstore_reader')) < 3 THEN
        RAISE NOTICE 'ragstore: the ragstore roles are missing; ask a DBA to run sql/roles.sql, then migrate again';
        RETURN;
    END IF;
    ALTER FUNCTION ragstore.families_stats_reset() OWNER TO ragstore_owner;
    -- The statistics are the chunk triggers' to write: app and reader read them.
    REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON ragstore.chunk_terms, ragstore.chunk_term_df,
        ragstore.family_chunk_deltas FROM ragstore_app, ragstore_reader;
    GRANT SELECT ON ragstore.chunk_terms, ragstore.chunk_term_df, ragstore.family_chunk_deltas
        TO ragstore_app, ragstore_reader;
    -- Trigger functions: nobody calls them.
    REVOKE ALL ON FUNCTION ragstore.chunks_count_inserted(), ragstore.chunks_count_deleted(),
        ragstore.chunks_terms_updated(), ragstore.chunks_count_truncated(), ragstore.families_stats_reset()
        FROM ragstore_app, ragstore_reader;
    -- A bulk load's index work: the app and the owner, never the reader.
    REVOKE ALL ON FUNCTION ragstore.family_bulk_drop_hnsw(text), ragstore.family_bulk_cluster(text),
        ragstore.family_build_hnsw(text) FROM ragstore_reader;
    GRANT EXECUTE ON FUNCTION ragstore.family_bulk_drop_hnsw(text), ragstore.family_bulk_cluster(text),
        ragstore.family_build_hnsw(text) TO ragstore_app, ragstore_owner;
END
$grants$;

-- section: downgrade
-- The migration first re-runs the definitions this revision replaced (0007: search; 0008: the bulk-load
-- functions; 0012: fts_top; 0017: hybrid_search, chunks_count_truncated, chunk_term_df_add; 0018:
-- chunks_count_deleted, chunks_terms_updated; 0020: chunks_count_inserted), then this section.
DROP TRIGGER IF EXISTS families_stats_drop ON ragstore.families;
DROP TRIGGER IF EXISTS families_stats_create ON ragstore.families;
DROP FUNCTION IF EXISTS ragstore.families_stats_reset();
REVOKE ALL ON FUNCTION ragstore.chunk_term_df_add(text[], text[], bigint[]) FROM PUBLIC;
DO $grants$
BEGIN
    IF (SELECT count(*) FROM pg_roles
        WHERE rolname IN ('ragstore_owner', 'ragstore_app', 'ragstore_reader')) < 3 THEN
        RETURN;
    END IF;
    ALTER FUNCTION ragstore.chunk_term_df_add(text[], text[], bigint[]) OWNER TO ragstore_owner;
END
$grants$
