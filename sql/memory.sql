-- Agent memory for SQL users (psql). The schema comes from migration 0003; nothing here changes it.
--
-- Row-level security: a non-superuser sees only the rows of the agent named in ragstore.agent, set
-- per transaction. A superuser bypasses row-level security (PostgreSQL's rule), so name the agent
-- in the WHERE clause too, as ragstore does.

-- Read one store of one agent as composition does: newest first, id ascending on ties (memory_read_idx).
BEGIN;
SELECT set_config('ragstore.agent', 'ana', true);
SELECT id, at, salience, confidence, left(content, 80) AS content
FROM ragstore.memory
WHERE agent = 'ana' AND store = 'episodic' AND at <= now() AND salience >= 0.2
ORDER BY at DESC, id
LIMIT 10;
COMMIT;

-- Append a record (the application path is `ragstore memory add` / `ragstore memory import`).
BEGIN;
SELECT set_config('ragstore.agent', 'ana', true);
INSERT INTO ragstore.memory (agent, id, store, at, content, confidence, tags)
VALUES ('ana', 'note-1', 'semantic', now(), 'Deploys need two approvals', 0.9, '{ops,deploy}')
ON CONFLICT (agent, id) DO NOTHING;
COMMIT;

-- UPDATE, DELETE and TRUNCATE are refused by a trigger (SQLSTATE 42501, "append-only").
-- Legal erasure, by a role with DELETE on ragstore.memory and EXECUTE on the function; the record's
-- recall embeddings go with it, and the log keeps who, when, which id and why (never the content):
SELECT * FROM ragstore.memory_forget('ana', 'note-1', 'GDPR art. 17 request #42');
SELECT log_id, agent, store, record_id, reason, forgotten_by, acting_role, forgotten_at
FROM ragstore.memory_forget_log ORDER BY log_id DESC LIMIT 20;

-- Records not yet embedded for recall with the offline backend (`ragstore memory recall` embeds them).
SELECT count(*) FROM ragstore.memory m
WHERE m.agent = 'ana' AND NOT EXISTS (
    SELECT 1 FROM ragstore.memory_embeddings e
    WHERE e.agent = m.agent AND e.id = m.id AND e.model = 'offline/fingerprint-v1/16'
);

-- Nearest records by cosine with the offline fingerprint, computed in SQL (not semantic; MiniLM
-- embeddings, model 'minilm/all-MiniLM-L6-v2/384', need the query embedded in Python).
BEGIN;
SELECT set_config('ragstore.agent', 'ana', true);
SELECT m.id, m.store, 1 - (e.embedding <=> ragstore.offline_embed('deploy approvals')::vector) AS cosine
FROM ragstore.memory m
JOIN ragstore.memory_embeddings e ON e.agent = m.agent AND e.id = m.id AND e.model = 'offline/fingerprint-v1/16'
WHERE m.agent = 'ana'
ORDER BY cosine DESC, m.id
LIMIT 5;
COMMIT;
