-- Revision 0007: a family serves exactly its own chunks.
--
-- ragstore.chunks gains a family column: the chunk (family, chunk_id) belongs to that family alone, and
-- two families holding one chunk_id hold two independent rows. Each family table gains a constant family
-- column and a foreign key (family, chunk_id) to its own chunks. An existing database is converted:
--   1. each chunk is copied to every family whose row embeds its current text (same content_sha256);
--   2. a family row whose content_sha256 differs from the chunk's text (another family rewrote the shared
--      row: that vector is not the embedding of the text) is deleted: the next `ragstore index` of that
--      family re-embeds it from its input;
--   3. chunks no family embeds are deleted;
--   4. embedding cache rows of HTTP providers are deleted (their key now holds the endpoint);
--   5. ragstore.search, ragstore.search_text and ragstore.hybrid_search read the family's own chunks.

-- Family tables: the serving table of each family, and the table a model migration is building.
CREATE TEMPORARY TABLE ragstore_0007_tables ON COMMIT DROP AS
SELECT f.name AS family, t.table_name, t.serving
FROM ragstore.families AS f
CROSS JOIN LATERAL (VALUES (f.table_name, true), (f.options -> 'target' ->> 'table', false)) AS t (table_name, serving)
WHERE t.table_name IS NOT NULL AND to_regclass(format('ragstore.%I', t.table_name)) IS NOT NULL;

-- The foreign keys on chunks (chunk_id) go first: they hang on the primary key being replaced.
DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT con.conrelid::regclass AS tbl, con.conname
        FROM pg_constraint AS con
        WHERE con.contype = 'f' AND con.confrelid = 'ragstore.chunks'::regclass
    LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', r.tbl, r.conname);
    END LOOP;
END
$do$;

ALTER TABLE ragstore.chunks DROP CONSTRAINT chunks_pkey;
ALTER TABLE ragstore.chunks ADD COLUMN family text;

DO $do$
DECLARE
    r record;
BEGIN
    -- 1. A copy of the chunk for each family whose serving row embeds the chunk's current text.
    FOR r IN SELECT * FROM ragstore_0007_tables WHERE serving LOOP
        EXECUTE format(
            $q$
            INSERT INTO ragstore.chunks (family, chunk_id, package_path, text, content_sha256, record_sha256,
                                         metadata, fts_config, created_at, updated_at)
            SELECT %L, c.chunk_id, c.package_path, c.text, c.content_sha256, c.record_sha256,
                   c.metadata, c.fts_config, c.created_at, c.updated_at
            FROM ragstore.chunks AS c
            JOIN ragstore.%I AS e ON e.chunk_id = c.chunk_id AND e.content_sha256 = c.content_sha256
            WHERE c.family IS NULL
            $q$, r.family, r.table_name);
    END LOOP;
END
$do$;

-- 3. The shared rows themselves: each family now has its own copy, or never embedded that text.
DELETE FROM ragstore.chunks WHERE family IS NULL;
ALTER TABLE ragstore.chunks ALTER COLUMN family SET NOT NULL;
ALTER TABLE ragstore.chunks ADD PRIMARY KEY (family, chunk_id);
ALTER TABLE ragstore.chunks
    ADD FOREIGN KEY (family) REFERENCES ragstore.families (name) ON DELETE CASCADE;
DROP INDEX ragstore.chunks_package_path_idx;
CREATE INDEX chunks_family_package_path_idx ON ragstore.chunks (family, package_path text_pattern_ops);
COMMENT ON TABLE ragstore.chunks IS
    'ragstore chunks: text, metadata and full text of each family''s own chunks, keyed (family, chunk_id)';

DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT * FROM ragstore_0007_tables LOOP
        -- 2. Rows without a chunk of their family: their vector is not the embedding of the stored text.
        EXECUTE format(
            'DELETE FROM ragstore.%I AS e WHERE NOT EXISTS ('
            'SELECT 1 FROM ragstore.chunks AS c WHERE c.family = %L AND c.chunk_id = e.chunk_id '
            'AND c.content_sha256 = e.content_sha256)',
            r.table_name, r.family);
        EXECUTE format(
            'ALTER TABLE ragstore.%I ADD COLUMN family text NOT NULL DEFAULT %L CHECK (family = %L), '
            'ADD FOREIGN KEY (family, chunk_id) REFERENCES ragstore.chunks (family, chunk_id) ON DELETE CASCADE',
            r.table_name, r.family, r.family);
    END LOOP;
END
$do$;
DROP TABLE ragstore_0007_tables;

-- 4. Cache keys name the provider's endpoint now; keys of HTTP providers made before could not.
DELETE FROM ragstore.embedding_cache WHERE model LIKE 'openai:%';
COMMENT ON TABLE ragstore.embedding_cache IS
    'ragstore embedding cache: model key "backend:model:dim" (with "@endpoint" for HTTP providers) + sha256 of the text -> its vector';

-- 5. The SQL functions (the same text is in sql/search.sql and sql/hybrid.sql, for people).

-- ragstore.search(family, query vector, k): top k of a family by cosine similarity, through its HNSW index.
-- The table name comes from ragstore.families and reaches SQL only through format('%I'); the column
-- type is vector/halfvec (a CHECK on ragstore.families) with the family's integer dimension. Only the
-- family's own chunks are read, and only where the row's content hash is the chunk's (the vector is the
-- embedding of the text returned). k is at most 1000, hnsw.ef_search's upper bound.
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

-- ragstore.search_text(family, query text, k): the same for an offline family, embedding the query in SQL.
CREATE OR REPLACE FUNCTION ragstore.search_text(family text, query text, k integer DEFAULT 10)
RETURNS TABLE (chunk_id text, package_path text, score double precision, text text)
LANGUAGE plpgsql STABLE
AS $fn$
DECLARE
    fam ragstore.families%ROWTYPE;
BEGIN
    SELECT * INTO fam FROM ragstore.families AS f WHERE f.name = family;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'ragstore.search_text: no family named % (see SELECT name FROM ragstore.families)',
            quote_literal(family) USING ERRCODE = 'undefined_object';
    END IF;
    IF fam.backend <> 'offline' THEN
        RAISE EXCEPTION 'ragstore.search_text: family % uses the % backend, which SQL cannot run; embed the '
            'query in your application and call ragstore.search(family, vector, k)', quote_literal(family),
            fam.backend USING ERRCODE = 'feature_not_supported';
    END IF;
    IF query IS NULL OR btrim(query) = '' THEN
        RAISE EXCEPTION 'ragstore.search_text: the query text is empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY SELECT * FROM ragstore.search(family, ragstore.offline_embed(query), k);
END
$fn$;
COMMENT ON FUNCTION ragstore.search_text(text, text, integer) IS
    'ragstore: search an offline family with a text query, embedded by ragstore.offline_embed';

-- ragstore.hybrid_search(family, query_text, query_vector, k): full text + vector over the family's own
-- chunks, each leg's top 50, fused by RRF (k 60); the IDF of the full-text score counts the family's
-- chunks only. k is at most 1000 (at most 100 rows come back: two legs of 50).
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
    fam    ragstore.families%ROWTYPE;
    config regconfig;
    plain  boolean;
BEGIN
    IF k IS NULL OR k < 1 OR k > 1000 THEN
        RAISE EXCEPTION 'ragstore.hybrid_search: k must be an integer from 1 to 1000, got %', k
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO fam FROM ragstore.families AS f WHERE f.name = family;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'ragstore.hybrid_search: no family named %', family USING ERRCODE = 'undefined_object';
    END IF;
    IF vector_dims(query_vector) <> fam.dim THEN
        RAISE EXCEPTION 'ragstore.hybrid_search: the query vector has % dimensions, family % holds %-d vectors',
            vector_dims(query_vector), family, fam.dim USING ERRCODE = 'data_exception';
    END IF;
    config := coalesce(fam.options ->> 'fts_config', 'english')::regconfig;
    plain := query_text !~* '["'']|(^|\s)-\S|(^|\s)or(\s|$)';
    RETURN QUERY EXECUTE format($q$
        WITH q AS MATERIALIZED (SELECT websearch_to_tsquery($1, $2) AS strict),
        terms AS MATERIALIZED (
            SELECT l.tq, ln(1.0 + (n.n - l.df + 0.5) / (l.df + 0.5)) AS idf
            FROM (
                SELECT x.tq, (SELECT count(*) FROM ragstore.chunks AS d WHERE d.family = $6 AND d.tsv @@ x.tq) AS df
                FROM (
                    SELECT DISTINCT ('''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''')::tsquery AS tq
                    FROM unnest(tsvector_to_array(to_tsvector($1, $2))) AS lexeme
                ) AS x
            ) AS l
            CROSS JOIN (SELECT greatest(count(*), 1)::float8 AS n FROM ragstore.chunks AS d WHERE d.family = $6) AS n
        ),
        m AS MATERIALIZED (
            SELECT CASE WHEN $5 THEN coalesce((SELECT string_agg(t.tq::text, ' | ') FROM terms AS t), '')::tsquery
                        ELSE q.strict END AS wide
            FROM q
        ),
        fts_top AS MATERIALIZED (
            SELECT c.chunk_id,
                   coalesce((SELECT sum(t.idf * CASE WHEN r.cd > 0 THEN 1.0 + r.cd / (r.cd + 1.0) ELSE 0.0 END)
                             FROM terms AS t
                             CROSS JOIN LATERAL (SELECT ts_rank_cd(c.tsv, t.tq, 2)::float8 AS cd) AS r), 0.0) AS score
            FROM m CROSS JOIN ragstore.chunks AS c
            JOIN ragstore.%1$I AS e
              ON e.family = c.family AND e.chunk_id = c.chunk_id AND e.content_sha256 = c.content_sha256
            WHERE c.family = $6 AND c.tsv @@ m.wide
            ORDER BY score DESC, c.chunk_id LIMIT 50
        ),
        fts AS (
            SELECT t.chunk_id, t.score,
                   row_number() OVER (ORDER BY t.score DESC, t.chunk_id) AS rank
            FROM fts_top AS t
        ),
        vec_top AS MATERIALIZED (
            SELECT e.chunk_id, (e.embedding <=> $3::%2$s)::float8 AS distance
            FROM ragstore.%1$I AS e ORDER BY e.embedding <=> $3::%2$s LIMIT 50
        ),
        vec AS (
            SELECT t.chunk_id, 1.0::float8 - t.distance AS score,
                   row_number() OVER (ORDER BY t.distance, t.chunk_id) AS rank
            FROM vec_top AS t
        ),
        fused AS (
            SELECT coalesce(f.chunk_id, v.chunk_id) AS chunk_id,
                   coalesce(1.0::float8 / (60 + f.rank), 0.0::float8)
                     + coalesce(1.0::float8 / (60 + v.rank), 0.0::float8) AS score,
                   f.rank AS fts_rank, f.score AS fts_score, v.rank AS vector_rank, v.score AS vector_score
            FROM fts AS f FULL OUTER JOIN vec AS v ON v.chunk_id = f.chunk_id
        )
        SELECT u.chunk_id, c.package_path, u.score, u.fts_rank, u.fts_score, u.vector_rank, u.vector_score, c.text
        FROM fused AS u
        JOIN ragstore.%1$I AS e ON e.chunk_id = u.chunk_id
        JOIN ragstore.chunks AS c
          ON c.family = e.family AND c.chunk_id = e.chunk_id AND c.content_sha256 = e.content_sha256
        ORDER BY u.score DESC, u.chunk_id
        LIMIT $4
    $q$, fam.table_name, fam.vector_type)
    USING config, query_text, query_vector, k, plain, fam.name;
END
$fn$;
COMMENT ON FUNCTION ragstore.hybrid_search(text, text, vector, integer) IS
    'ragstore hybrid search: full text + vector over the family''s chunks, each top 50, fused by RRF (k 60); ranks and scores per leg';
