-- Revision 0010: hybrid fusion by the family's settings, a per-family chunk count, one SQL entry point.
--
-- 1. ragstore.family_chunk_deltas: every statement that inserts or deletes chunks appends one row per
--    family it touched (family, +n or -n), from statement-level triggers on ragstore.chunks. The
--    full-text IDF reads N (the family's chunk count) as the sum of its deltas: as many rows as write
--    statements, not as chunks, and no lock shared by concurrent writers. TRUNCATE clears it.
-- 2. ragstore.hybrid_search(family, query_text, query_vector, k) fuses by the family's stored settings
--    (option "fusion", written by `ragstore family tune`; default convex combination, theoretical min-max, dense
--    weight 0.8, 50 per leg), the statement of ragstore/sql/hybrid.sql.
-- 3. ragstore.fts_search(family, query_text, k): the full-text leg alone.
-- 4. ragstore.search_auto(family, query_text, query_vector, k): what `ragstore search` runs by default:
--    full text for an offline family, hybrid for a semantic one given the query text and its vector,
--    HNSW for a bare vector.

-- No write between the count below and the triggers: writers wait for this migration's commit.
LOCK TABLE ragstore.chunks IN SHARE ROW EXCLUSIVE MODE;
CREATE TABLE ragstore.family_chunk_deltas (
    id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    family text   NOT NULL,
    delta  bigint NOT NULL
);
CREATE INDEX family_chunk_deltas_family_idx ON ragstore.family_chunk_deltas (family) INCLUDE (delta);
COMMENT ON TABLE ragstore.family_chunk_deltas IS
    'ragstore: chunks added (+) or removed (-) per family and write statement; sum(delta) is the family''s chunk count';
INSERT INTO ragstore.family_chunk_deltas (family, delta)
SELECT family, count(*) FROM ragstore.chunks GROUP BY family;

CREATE FUNCTION ragstore.chunks_count_inserted() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, ragstore AS $fn$
BEGIN
    INSERT INTO ragstore.family_chunk_deltas (family, delta) SELECT family, count(*) FROM new_rows GROUP BY family;
    RETURN NULL;
END
$fn$;
CREATE FUNCTION ragstore.chunks_count_deleted() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, ragstore AS $fn$
BEGIN
    INSERT INTO ragstore.family_chunk_deltas (family, delta) SELECT family, -count(*) FROM old_rows GROUP BY family;
    RETURN NULL;
END
$fn$;
CREATE FUNCTION ragstore.chunks_count_truncated() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, ragstore AS $fn$
BEGIN
    DELETE FROM ragstore.family_chunk_deltas;
    RETURN NULL;
END
$fn$;
CREATE TRIGGER chunks_count_insert AFTER INSERT ON ragstore.chunks
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ragstore.chunks_count_inserted();
CREATE TRIGGER chunks_count_delete AFTER DELETE ON ragstore.chunks
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION ragstore.chunks_count_deleted();
CREATE TRIGGER chunks_count_truncate AFTER TRUNCATE ON ragstore.chunks
    FOR EACH STATEMENT EXECUTE FUNCTION ragstore.chunks_count_truncated();
-- Written only through the triggers (SECURITY DEFINER, owned by ragstore_owner); read by every role.
DO $grants$
BEGIN
    IF (SELECT count(*) FROM pg_roles
        WHERE rolname IN ('ragstore_owner', 'ragstore_app', 'ragstore_reader')) < 3 THEN
        RAISE NOTICE 'ragstore: the ragstore roles are missing; ask a DBA to run sql/roles.sql, then migrate again';
        RETURN;
    END IF;
    GRANT SELECT ON ragstore.family_chunk_deltas TO ragstore_app, ragstore_reader;
    ALTER TABLE ragstore.family_chunk_deltas OWNER TO ragstore_owner;
    ALTER FUNCTION ragstore.chunks_count_inserted() OWNER TO ragstore_owner;
    ALTER FUNCTION ragstore.chunks_count_deleted() OWNER TO ragstore_owner;
    ALTER FUNCTION ragstore.chunks_count_truncated() OWNER TO ragstore_owner;
END
$grants$;
REVOKE ALL ON FUNCTION ragstore.chunks_count_inserted(), ragstore.chunks_count_deleted(),
    ragstore.chunks_count_truncated() FROM PUBLIC;

-- ragstore.hybrid_search(family, query_text, query_vector, k): full text + vector over the family's own
-- chunks, fused by the family's stored settings (default: convex combination of cosine and full-text
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
    plain   boolean;
    fusion  jsonb;
    per_leg integer;
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
    fusion := '{"fusion": "cc", "normalization": "tmm", "alpha": 0.8, "per_leg": 50, "rrf_k": 60}'::jsonb
              || coalesce(fam.options -> 'fusion', '{}'::jsonb);
    per_leg := greatest(least((fusion ->> 'per_leg')::integer, 1000), k);
    PERFORM set_config('hnsw.ef_search', least(greatest(per_leg, 100), 1000)::text, true);
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
            CROSS JOIN (SELECT greatest(coalesce(sum(d.delta), 0), 1)::float8 AS n
                        FROM ragstore.family_chunk_deltas AS d WHERE d.family = $6) AS n
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
            ORDER BY score DESC, c.chunk_id LIMIT $7
        ),
        fts AS MATERIALIZED (
            SELECT t.chunk_id, t.score, row_number() OVER (ORDER BY t.score DESC, t.chunk_id) AS rank
            FROM fts_top AS t
        ),
        vec_top AS MATERIALIZED (
            SELECT e.chunk_id, (e.embedding <=> $3::%2$s)::float8 AS distance
            FROM ragstore.%1$I AS e ORDER BY e.embedding <=> $3::%2$s LIMIT $7
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
        filled AS MATERIALIZED (
            SELECT p.*, c.package_path, c.text,
                   coalesce(p.vector_score,
                            coalesce(nullif(1.0::float8 - (e.embedding <=> $3::%2$s), 'NaN'::float8), 0.0::float8))
                     AS cosine,
                   coalesce(p.fts_score, (SELECT sum(t.idf * CASE WHEN r.cd > 0 THEN 1.0 + r.cd / (r.cd + 1.0) ELSE 0.0 END)
                        FROM terms AS t CROSS JOIN LATERAL (SELECT ts_rank_cd(c.tsv, t.tq, 2)::float8 AS cd) AS r), 0.0)
                     AS lexical
            FROM pool AS p
            JOIN ragstore.%1$I AS e ON e.chunk_id = p.chunk_id
            JOIN ragstore.chunks AS c
              ON c.family = e.family AND c.chunk_id = e.chunk_id AND c.content_sha256 = e.content_sha256
        ),
        normed AS (
            SELECT x.*,
                   CASE $9
                       WHEN 'minmax' THEN coalesce((x.cosine - s.v_min) / nullif(s.v_max - s.v_min, 0.0),
                                                   CASE WHEN x.cosine >= s.v_max THEN 1.0 ELSE 0.0 END)
                       WHEN 'zscore' THEN coalesce((x.cosine - s.v_mean) / nullif(s.v_sd, 0.0), 0.0)
                       ELSE coalesce((x.cosine + 1.0) / nullif(s.v_max + 1.0, 0.0), 0.0)
                   END::float8 AS v_norm,
                   CASE $9
                       WHEN 'minmax' THEN coalesce((x.lexical - s.f_min) / nullif(s.f_max - s.f_min, 0.0),
                                                   CASE WHEN x.lexical >= s.f_max THEN 1.0 ELSE 0.0 END)
                       WHEN 'zscore' THEN coalesce((x.lexical - s.f_mean) / nullif(s.f_sd, 0.0), 0.0)
                       ELSE coalesce(x.lexical / nullif(s.f_max, 0.0), 0.0)
                   END::float8 AS f_norm
            FROM filled AS x CROSS JOIN stats AS s
        ),
        fused AS (
            SELECT n.*,
                   CASE WHEN $8 = 'rrf'
                        THEN coalesce(1.0::float8 / ($11 + n.fts_rank), 0.0::float8)
                             + coalesce(1.0::float8 / ($11 + n.vector_rank), 0.0::float8)
                        ELSE $10 * n.v_norm + (1.0::float8 - $10) * n.f_norm
                   END AS fused_score
            FROM normed AS n
        )
        SELECT u.chunk_id, u.package_path, u.fused_score, u.fts_rank, u.fts_score, u.vector_rank, u.vector_score,
               u.text
        FROM fused AS u
        ORDER BY u.fused_score DESC, u.chunk_id
        LIMIT $4
    $q$, fam.table_name, format('%s(%s)', fam.vector_type, fam.dim::integer))
    USING config, query_text, query_vector, k, plain, fam.name, per_leg, fusion ->> 'fusion',
          fusion ->> 'normalization', (fusion ->> 'alpha')::float8, (fusion ->> 'rrf_k')::integer;
END
$fn$;
COMMENT ON FUNCTION ragstore.hybrid_search(text, text, vector, integer) IS
    'ragstore hybrid search: full text + vector over the family''s chunks fused by its stored settings (default convex combination, theoretical min-max, dense weight 0.8, 50 per leg); ranks and scores per leg';

-- ragstore.fts_search(family, query_text, k): the full-text leg alone, over the family's own chunks.
CREATE OR REPLACE FUNCTION ragstore.fts_search(family text, query_text text, k integer DEFAULT 10)
RETURNS TABLE (chunk_id text, package_path text, score float8, text text)
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $fn$
DECLARE
    fam    ragstore.families%ROWTYPE;
    config regconfig;
    plain  boolean;
BEGIN
    IF k IS NULL OR k < 1 OR k > 1000 THEN
        RAISE EXCEPTION 'ragstore.fts_search: k must be an integer from 1 to 1000, got %', k
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO fam FROM ragstore.families AS f WHERE f.name = family;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'ragstore.fts_search: no family named %', family USING ERRCODE = 'undefined_object';
    END IF;
    config := coalesce(fam.options ->> 'fts_config', 'english')::regconfig;
    plain := query_text !~* '["'']|(^|\s)-\S|(^|\s)or(\s|$)';
    RETURN QUERY EXECUTE format($q$
        WITH q AS MATERIALIZED (SELECT websearch_to_tsquery($1, $2) AS strict),
        terms AS MATERIALIZED (
            SELECT l.tq, ln(1.0 + (n.n - l.df + 0.5) / (l.df + 0.5)) AS idf
            FROM (
                SELECT x.tq, (SELECT count(*) FROM ragstore.chunks AS d WHERE d.family = $4 AND d.tsv @@ x.tq) AS df
                FROM (
                    SELECT DISTINCT ('''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''')::tsquery AS tq
                    FROM unnest(tsvector_to_array(to_tsvector($1, $2))) AS lexeme
                ) AS x
            ) AS l
            CROSS JOIN (SELECT greatest(coalesce(sum(d.delta), 0), 1)::float8 AS n
                        FROM ragstore.family_chunk_deltas AS d WHERE d.family = $4) AS n
        ),
        m AS MATERIALIZED (
            SELECT CASE WHEN $5 THEN coalesce((SELECT string_agg(t.tq::text, ' | ') FROM terms AS t), '')::tsquery
                        ELSE q.strict END AS wide
            FROM q
        ),
        top AS MATERIALIZED (
            SELECT c.chunk_id,
                   coalesce((SELECT sum(t.idf * CASE WHEN r.cd > 0 THEN 1.0 + r.cd / (r.cd + 1.0) ELSE 0.0 END)
                             FROM terms AS t
                             CROSS JOIN LATERAL (SELECT ts_rank_cd(c.tsv, t.tq, 2)::float8 AS cd) AS r), 0.0) AS score
            FROM m CROSS JOIN ragstore.chunks AS c
            JOIN ragstore.%1$I AS e
              ON e.family = c.family AND e.chunk_id = c.chunk_id AND e.content_sha256 = c.content_sha256
            WHERE c.family = $4 AND c.tsv @@ m.wide
            ORDER BY score DESC, c.chunk_id LIMIT $3
        )
        SELECT t.chunk_id, c.package_path, t.score, c.text
        FROM top AS t
        JOIN ragstore.chunks AS c ON c.family = $4 AND c.chunk_id = t.chunk_id
        ORDER BY t.score DESC, t.chunk_id
    $q$, fam.table_name)
    USING config, query_text, k, fam.name, plain;
END
$fn$;
COMMENT ON FUNCTION ragstore.fts_search(text, text, integer) IS
    'ragstore full-text search over the family''s own chunks (idf-weighted ts_rank_cd; plain words match any)';

-- ragstore.search_auto(family, query_text, query_vector, k): the family's default search mode, as
-- `ragstore search` runs it: full text for an offline family (its vectors are fingerprints); hybrid for a
-- semantic family given the query text and its vector (SQL cannot run the model: embed the query in the
-- application); HNSW when only a vector is given.
CREATE OR REPLACE FUNCTION ragstore.search_auto(family text, query_text text, query_vector vector DEFAULT NULL,
                                                k integer DEFAULT 10)
RETURNS TABLE (chunk_id text, package_path text, score float8, text text)
LANGUAGE plpgsql STABLE
AS $fn$
DECLARE
    fam ragstore.families%ROWTYPE;
BEGIN
    SELECT * INTO fam FROM ragstore.families AS f WHERE f.name = family;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'ragstore.search_auto: no family named %', family USING ERRCODE = 'undefined_object';
    END IF;
    IF query_text IS NOT NULL AND btrim(query_text) = '' THEN
        RAISE EXCEPTION 'ragstore.search_auto: the query text is empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF query_text IS NULL THEN
        IF query_vector IS NULL THEN
            RAISE EXCEPTION 'ragstore.search_auto: give a query text, a query vector or both'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        RETURN QUERY SELECT s.chunk_id, s.package_path, s.score, s.text FROM ragstore.search(family, query_vector, k) AS s;
    ELSIF fam.backend = 'offline' THEN
        RETURN QUERY SELECT s.chunk_id, s.package_path, s.score, s.text FROM ragstore.fts_search(family, query_text, k) AS s;
    ELSIF query_vector IS NULL THEN
        RAISE EXCEPTION 'ragstore.search_auto: family % uses the % backend, which SQL cannot run; embed the query '
            'in your application and pass it as query_vector', quote_literal(family), fam.backend
            USING ERRCODE = 'feature_not_supported';
    ELSE
        RETURN QUERY SELECT h.chunk_id, h.package_path, h.score, h.text
                     FROM ragstore.hybrid_search(family, query_text, query_vector, k) AS h;
    END IF;
END
$fn$;
COMMENT ON FUNCTION ragstore.search_auto(text, text, vector, integer) IS
    'ragstore: the family''s default search (full text for offline families, hybrid for semantic ones, HNSW for a bare vector)';
DO $grants$
BEGIN
    IF (SELECT count(*) FROM pg_roles
        WHERE rolname IN ('ragstore_owner', 'ragstore_app', 'ragstore_reader')) < 3 THEN
        RAISE NOTICE 'ragstore: the ragstore roles are missing; ask a DBA to run sql/roles.sql, then migrate again';
        RETURN;
    END IF;
    ALTER FUNCTION ragstore.fts_search(text, text, integer) OWNER TO ragstore_owner;
    ALTER FUNCTION ragstore.search_auto(text, text, vector, integer) OWNER TO ragstore_owner;
    GRANT EXECUTE ON FUNCTION ragstore.fts_search(text, text, integer),
        ragstore.search_auto(text, text, vector, integer) TO ragstore_app, ragstore_reader;
END
$grants$
