"""agent memory: append-only stores with row-level security

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

One table ``ragstore.memory`` holds the five stores (a ``store`` column, checked): the five have the
same shape, the same append-only rule and the same isolation policy, so one table keeps one trigger,
one policy and one index serving every store's newest-first read. Append-only is enforced here, not in
Python: a trigger refuses UPDATE always and DELETE unless ``ragstore.memory_forget`` (the logged,
legal-erasure path) set ``ragstore.forget`` for the transaction; the trigger writes the erasure log,
so no permitted delete goes unlogged. Row-level security (FORCE, so the owner is bound too) shows a
session only the rows of ``current_setting('ragstore.agent')``.
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

UPGRADE = r"""
CREATE TABLE ragstore.memory (
    agent       text NOT NULL CHECK (agent ~ '^[A-Za-z0-9_.-]{1,64}$'),
    id          text COLLATE "C" NOT NULL CHECK (id ~ '\S'),
    store       text NOT NULL
                CHECK (store IN ('episodic', 'semantic', 'procedural', 'decision', 'transcript')),
    at          timestamptz NOT NULL,
    content     text NOT NULL CHECK (content ~ '\S'),
    salience    double precision NOT NULL DEFAULT 0.5 CHECK (salience >= 0 AND salience <= 1),
    confidence  double precision NOT NULL DEFAULT 0.5 CHECK (confidence >= 0 AND confidence <= 1),
    tags        text[] NOT NULL DEFAULT '{}',
    metadata    jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(metadata) = 'object'),
    tsv         tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, content)) STORED,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent, id)
);
-- Composition reads one store of one agent newest first, id ascending (code point order: id is "C").
CREATE INDEX memory_read_idx ON ragstore.memory (agent, store, at DESC, id);
COMMENT ON TABLE ragstore.memory IS
    'ragstore agent memory: five append-only stores; erase only with ragstore.memory_forget()';

CREATE TABLE ragstore.memory_forget_log (
    log_id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    agent         text NOT NULL,
    store         text NOT NULL,
    record_id     text COLLATE "C" NOT NULL,
    reason        text NOT NULL CHECK (reason ~ '\S'),
    forgotten_by  text NOT NULL DEFAULT session_user,  -- the login role
    acting_role   text NOT NULL,                       -- current_user of ragstore.memory_forget (after SET ROLE)
    forgotten_at  timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE ragstore.memory_forget_log IS
    'ragstore memory erasures: who, when, which record and why; never the content';

-- Embeddings of memory records for recall, one row per record and model. The column is an
-- unconstrained vector so that every backend (16-d offline, 384-d MiniLM, ...) shares the table;
-- recall ranks one agent's records exactly, which needs no HNSW index at memory scale.
CREATE TABLE ragstore.memory_embeddings (
    agent      text NOT NULL,
    id         text COLLATE "C" NOT NULL,
    model      text NOT NULL,
    dim        integer NOT NULL CHECK (dim BETWEEN 1 AND 16000),
    embedding  vector NOT NULL CHECK (vector_dims(embedding) = dim),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (agent, model, id),
    FOREIGN KEY (agent, id) REFERENCES ragstore.memory (agent, id) ON DELETE CASCADE
);
COMMENT ON TABLE ragstore.memory_embeddings IS 'ragstore memory recall: record embeddings, one row per model';

CREATE FUNCTION ragstore.memory_append_only() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $fn$
DECLARE
    reason text;
BEGIN
    IF TG_LEVEL = 'ROW' AND TG_OP = 'DELETE' AND TG_TABLE_NAME = 'memory'
       AND coalesce(current_setting('ragstore.forget', true), '') = 'on' THEN
        reason := coalesce(current_setting('ragstore.forget_reason', true), '');
        IF reason !~ '\S' THEN
            RAISE EXCEPTION 'ragstore.memory: an erasure needs a reason'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- current_user here is this function's owner (SECURITY DEFINER): the invoker's role comes
        -- from ragstore.memory_forget, which runs as the invoker.
        INSERT INTO ragstore.memory_forget_log (agent, store, record_id, reason, acting_role)
        VALUES (OLD.agent, OLD.store, OLD.id, reason,
                coalesce(nullif(current_setting('ragstore.forget_role', true), ''), session_user));
        RETURN OLD;
    END IF;
    -- USING MESSAGE, no placeholders: the offline DDL (ragstore migrate --sql) would double a percent sign.
    RAISE EXCEPTION USING
        MESSAGE = 'ragstore.' || TG_TABLE_NAME || ': append-only, ' || TG_OP || ' refused',
        ERRCODE = 'insufficient_privilege',
        HINT = 'erase a memory record with ragstore.memory_forget(agent, id, reason)';
END
$fn$;

CREATE TRIGGER memory_append_only BEFORE UPDATE OR DELETE ON ragstore.memory
    FOR EACH ROW EXECUTE FUNCTION ragstore.memory_append_only();
CREATE TRIGGER memory_no_truncate BEFORE TRUNCATE ON ragstore.memory
    FOR EACH STATEMENT EXECUTE FUNCTION ragstore.memory_append_only();
CREATE TRIGGER memory_forget_log_append_only BEFORE UPDATE OR DELETE ON ragstore.memory_forget_log
    FOR EACH ROW EXECUTE FUNCTION ragstore.memory_append_only();
CREATE TRIGGER memory_forget_log_no_truncate BEFORE TRUNCATE ON ragstore.memory_forget_log
    FOR EACH STATEMENT EXECUTE FUNCTION ragstore.memory_append_only();

-- The legal-erasure path. SECURITY INVOKER: who may erase is decided by the DELETE privilege on
-- ragstore.memory (granted to the DBA role only), not by knowing this function's name.
CREATE FUNCTION ragstore.memory_forget(p_agent text, p_id text, p_reason text)
RETURNS SETOF ragstore.memory_forget_log
LANGUAGE plpgsql SET search_path = pg_catalog AS $fn$
DECLARE
    previous_agent text := current_setting('ragstore.agent', true);
    deleted integer;
BEGIN
    IF p_reason IS NULL OR p_reason !~ '\S' THEN
        RAISE EXCEPTION 'ragstore.memory_forget: a reason is required' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM set_config('ragstore.agent', p_agent, true);
    PERFORM set_config('ragstore.forget', 'on', true);
    PERFORM set_config('ragstore.forget_reason', p_reason, true);
    PERFORM set_config('ragstore.forget_role', current_user, true);
    DELETE FROM ragstore.memory WHERE agent = p_agent AND id = p_id;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    PERFORM set_config('ragstore.forget', '', true);
    PERFORM set_config('ragstore.forget_reason', '', true);
    PERFORM set_config('ragstore.forget_role', '', true);
    PERFORM set_config('ragstore.agent', coalesce(previous_agent, ''), true);
    IF deleted > 0 THEN
        RETURN QUERY SELECT * FROM ragstore.memory_forget_log l
            WHERE l.agent = p_agent AND l.record_id = p_id ORDER BY l.log_id DESC LIMIT 1;
    END IF;
END
$fn$;
REVOKE ALL ON FUNCTION ragstore.memory_forget(text, text, text) FROM PUBLIC;

ALTER TABLE ragstore.memory ENABLE ROW LEVEL SECURITY;
ALTER TABLE ragstore.memory FORCE ROW LEVEL SECURITY;
CREATE POLICY memory_agent_isolation ON ragstore.memory
    USING (agent = current_setting('ragstore.agent', true))
    WITH CHECK (agent = current_setting('ragstore.agent', true));
ALTER TABLE ragstore.memory_embeddings ENABLE ROW LEVEL SECURITY;
ALTER TABLE ragstore.memory_embeddings FORCE ROW LEVEL SECURITY;
CREATE POLICY memory_embeddings_agent_isolation ON ragstore.memory_embeddings
    USING (agent = current_setting('ragstore.agent', true))
    WITH CHECK (agent = current_setting('ragstore.agent', true));
"""

DOWNGRADE = r"""
DROP FUNCTION ragstore.memory_forget(text, text, text);
DROP TABLE ragstore.memory_embeddings;
DROP TABLE ragstore.memory_forget_log;
DROP TABLE ragstore.memory;
DROP FUNCTION ragstore.memory_append_only();
"""


def upgrade() -> None:
    op.execute(UPGRADE.strip().rstrip(";"))


def downgrade() -> None:
    op.execute(DOWNGRADE.strip().rstrip(";"))
