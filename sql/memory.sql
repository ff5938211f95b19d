-- Agent memory for SQL users (psql). The schema is in ragstore/sql/schema.sql (section tables, agent
-- memory) and its functions in ragstore/sql/functions/; nothing here changes it.
--
-- Who sees what: row-level security lets a role read and append the memory of the agents bound to it in
-- ragstore.agent_principals (its current_user is, or has the privileges of, the bound role); the owner
-- side (members of ragstore_owner) sees every agent. No setting takes part. A superuser bypasses
-- row-level security (PostgreSQL's rule), so name the agent in the WHERE clause too, as ragstore does.

-- As the owner: bind agent ana to the login role alice (the CLI: ragstore memory grant --agent ana --role alice).
INSERT INTO ragstore.agent_principals (agent, role_name) VALUES ('ana', 'alice') ON CONFLICT DO NOTHING;
-- Which roles act for which agents, and which agents the current role acts for.
SELECT agent, role_name, granted_by, granted_at FROM ragstore.agent_principals ORDER BY agent, role_name;
SELECT ragstore.memory_agents(), ragstore.acts_as_owner();

-- Read one store of one agent as composition does: newest first, id ascending on ties (memory_read_idx).
SELECT id, at, salience, confidence, left(content, 80) AS content
FROM ragstore.memory
WHERE agent = 'ana' AND store = 'episodic' AND at <= now() AND salience >= 0.2
ORDER BY at DESC, id
LIMIT 10;

-- Append a record (the application path is `ragstore memory add` / `ragstore memory import`), as a role
-- bound to ana; for any other agent the row-level security check refuses it.
INSERT INTO ragstore.memory (agent, id, store, at, content, confidence, tags)
VALUES ('ana', 'note-1', 'semantic', now(), 'Deploys need two approvals', 0.9, '{ops,deploy}')
ON CONFLICT (agent, id) DO NOTHING;

-- UPDATE, DELETE and TRUNCATE are refused (SQLSTATE 42501): by privileges for the app and the reader,
-- by the append-only trigger for everyone else.
-- Legal erasure, by the owner side only (EXECUTE on the function is ragstore_owner's); the record's
-- recall embeddings go with it, and the log keeps who (login role and acting role, from the database's
-- own session_user and current_user), when, which id and why (never the content):
SELECT * FROM ragstore.memory_forget('ana', 'note-1', 'GDPR art. 17 request #42');
-- The log: the owner sees every entry, a bound role the entries of its own agents.
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
SELECT m.id, m.store, 1 - (e.embedding <=> ragstore.offline_embed('deploy approvals')::vector) AS cosine
FROM ragstore.memory m
JOIN ragstore.memory_embeddings e ON e.agent = m.agent AND e.id = m.id AND e.model = 'offline/fingerprint-v1/16'
WHERE m.agent = 'ana'
ORDER BY cosine DESC, m.id
LIMIT 5;
