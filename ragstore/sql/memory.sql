-- Agent memory: the five append-only stores in ragstore.memory, their recall embeddings in
-- ragstore.memory_embeddings, the logged erasure path, and the owner's bindings of agents to roles.
-- Row-level security (ragstore/sql/schema.sql) shows a role only the agents bound to it in
-- ragstore.agent_principals (the owner side sees all); every block also names the agent in its WHERE
-- clause, so a superuser connection (which bypasses row-level security) is isolated the same way.

-- name: insert_records
-- Idempotent by (agent, id): an existing id is left alone; the caller compares what came back.
INSERT INTO ragstore.memory (agent, id, store, at, content, salience, confidence, tags, metadata)
SELECT r.agent, r.id, r.store, r.at, r.content, r.salience, r.confidence, r.tags, r.metadata
FROM jsonb_to_recordset(%(records)s::jsonb) AS r(
    agent text, id text, store text, at timestamptz, content text,
    salience double precision, confidence double precision, tags text[], metadata jsonb
)
ORDER BY r.id
ON CONFLICT (agent, id) DO NOTHING
RETURNING id

-- name: records_by_id
SELECT agent, id, store, at, content, salience, confidence, tags, metadata
FROM ragstore.memory
WHERE agent = %(agent)s AND id = ANY(%(ids)s)

-- name: read_store
-- One page of one store, in composition order (memory_read_idx). %(pattern)s, when not NULL, is the
-- ASCII-lowered task hint as a LIKE pattern: it is exact for ASCII content, and content with any
-- non-ASCII character always passes (Python casefolds it), so the page is a superset of the matches
-- in the right order. %(after_at)s/%(after_id)s continue after the last row of the previous page.
SELECT id, at, content, salience, confidence, tags, metadata
FROM ragstore.memory
WHERE agent = %(agent)s
  AND store = %(store)s
  AND at <= %(not_after)s
  AND (%(min_salience)s::float8 IS NULL OR salience >= %(min_salience)s::float8)
  AND (%(min_confidence)s::float8 IS NULL OR confidence >= %(min_confidence)s::float8)
  AND (%(pattern)s::text IS NULL
       OR lower(content COLLATE "C") LIKE %(pattern)s::text
       OR octet_length(content) <> char_length(content))
  AND (%(after_at)s::timestamptz IS NULL OR at < %(after_at)s::timestamptz OR id > %(after_id)s::text)
ORDER BY at DESC, id
LIMIT %(limit)s

-- name: pending_embeddings
-- Records of the declared stores with no embedding for this model yet, newest first.
SELECT m.id, m.content
FROM ragstore.memory m
WHERE m.agent = %(agent)s
  AND m.store = ANY(%(stores)s::text[])
  AND NOT EXISTS (
      SELECT 1 FROM ragstore.memory_embeddings e
      WHERE e.agent = m.agent AND e.model = %(model)s AND e.id = m.id
  )
ORDER BY m.at DESC, m.id
LIMIT %(limit)s

-- name: may_store_embeddings
SELECT has_table_privilege('ragstore.memory_embeddings', 'INSERT')

-- name: insert_embedding
INSERT INTO ragstore.memory_embeddings (agent, id, model, dim, embedding)
VALUES (%(agent)s, %(id)s, %(model)s, %(dim)s, %(embedding)s)
ON CONFLICT (agent, model, id) DO NOTHING

-- name: recall_candidates
-- Scores every record of the declared stores exactly (cosine from pgvector's <=>, lexical from
-- ts_rank_cd against an OR of the query's English lexemes) and keeps the best %(pool)s of each leg.
-- A record not embedded yet has a NULL cosine and can still come in by the lexical leg.
WITH q AS (
    SELECT nullif(array_to_string(ARRAY(
        SELECT quote_literal(lexeme)
        FROM unnest(tsvector_to_array(to_tsvector('english'::regconfig, %(query)s::text))) AS lexeme
        ORDER BY lexeme
    ), ' | '), '')::tsquery AS tsq
), scored AS (
    SELECT m.id, m.store, m.at, m.content, m.salience, m.confidence, m.tags, m.metadata,
           1 - (e.embedding <=> %(embedding)s::vector) AS cosine,
           coalesce(ts_rank_cd(m.tsv, q.tsq), 0)::float8 AS lexical
    FROM ragstore.memory m
    CROSS JOIN q
    LEFT JOIN ragstore.memory_embeddings e
           ON e.agent = m.agent AND e.model = %(model)s AND e.id = m.id
    WHERE m.agent = %(agent)s AND m.store = ANY(%(stores)s::text[]) AND m.at <= %(now)s
), ranked AS (
    SELECT s.*,
           row_number() OVER (ORDER BY s.cosine DESC NULLS LAST, s.id) AS by_cosine,
           row_number() OVER (ORDER BY s.lexical DESC, s.id) AS by_lexical
    FROM scored s
)
SELECT id, store, at, content, salience, confidence, tags, metadata, cosine, lexical
FROM ranked
WHERE (by_cosine <= %(pool)s AND cosine IS NOT NULL) OR (by_lexical <= %(pool)s AND lexical > 0)
ORDER BY id

-- name: forget
SELECT log_id, agent, store, record_id, reason, forgotten_by, acting_role, forgotten_at
FROM ragstore.memory_forget(%(agent)s, %(id)s, %(reason)s)


-- name: role_exists
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %(role)s)

-- name: grant_agent
-- The owner side only (app and reader hold SELECT on the table); a second grant is a no-op.
INSERT INTO ragstore.agent_principals (agent, role_name)
VALUES (%(agent)s, %(role)s)
ON CONFLICT (agent, role_name) DO NOTHING
RETURNING agent

-- name: revoke_agent
DELETE FROM ragstore.agent_principals
WHERE agent = %(agent)s AND role_name = %(role)s
RETURNING agent

-- name: list_principals
-- Bindings whose role no longer exists are listed with role_exists = false (they grant nothing).
SELECT p.agent, p.role_name, p.granted_by, p.granted_at,
       EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = p.role_name) AS role_exists
FROM ragstore.agent_principals p
WHERE %(agent)s::text IS NULL OR p.agent = %(agent)s::text
ORDER BY p.agent, p.role_name

-- name: acting_roles
-- Who this session is, for error messages: the current role and the login role.
SELECT current_user::text, session_user::text
