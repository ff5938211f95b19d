"""core schema: pgvector, the family registry, chunks, ragstore.offline_embed

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

UPGRADE = r"""
CREATE EXTENSION IF NOT EXISTS vector;
CREATE SCHEMA IF NOT EXISTS ragstore;

-- One row per embedding space. Each family has its own table ragstore.<table_name>.
CREATE TABLE ragstore.families (
    name         text PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9_]{0,47}$'),
    backend      text NOT NULL,
    model        text NOT NULL,
    dim          integer NOT NULL CHECK (dim BETWEEN 1 AND 16000),
    vector_type  text NOT NULL DEFAULT 'vector' CHECK (vector_type IN ('vector', 'halfvec')),
    table_name   text NOT NULL UNIQUE CHECK (table_name ~ '^emb_[a-z0-9_]{1,58}$'),
    state        text NOT NULL DEFAULT 'ready' CHECK (state IN ('ready', 'migrating')),
    options      jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE ragstore.families IS 'ragstore embedding families: one backend + model + dimension each';
COMMENT ON COLUMN ragstore.families.options IS 'backend options (base URL, dimensions); never secrets';

-- Every chunk once, whatever families embed it. content_sha256 is the SHA-256 of text (the embedding
-- cache key); record_sha256 covers package_path, text and metadata (what makes a re-run a no-op).
CREATE TABLE ragstore.chunks (
    chunk_id        text PRIMARY KEY,
    package_path    text NOT NULL,
    text            text NOT NULL,
    content_sha256  bytea NOT NULL CHECK (length(content_sha256) = 32),
    record_sha256   bytea NOT NULL CHECK (length(record_sha256) = 32),
    metadata        jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(metadata) = 'object'),
    fts_config      regconfig NOT NULL DEFAULT 'english',
    tsv             tsvector GENERATED ALWAYS AS (to_tsvector(fts_config, text)) STORED,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX chunks_package_path_idx ON ragstore.chunks (package_path text_pattern_ops);
CREATE INDEX chunks_tsv_idx ON ragstore.chunks USING gin (tsv);
CREATE INDEX chunks_metadata_idx ON ragstore.chunks USING gin (metadata jsonb_path_ops);
COMMENT ON TABLE ragstore.chunks IS 'ragstore chunks: text, metadata and full text, shared by all families';

-- The fingerprint of docs/decisions.md ("The offline backend"), bit-identical to
-- ragstore.embed.offline.fingerprint. ascii() returns the code point because ragstore migrate insists
-- on a UTF8 database.
CREATE FUNCTION ragstore.offline_embed(input text) RETURNS vector(16)
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
DECLARE
    codes  bigint[];
    n      integer;
    h      bigint;
    mult   bigint;
    result real[] := ARRAY[]::real[];
BEGIN
    IF input = '' THEN
        RAISE EXCEPTION 'ragstore.offline_embed: empty text is never embedded'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    codes := ARRAY(
        SELECT ascii(c)::bigint
        FROM unnest(string_to_array(input, NULL)) WITH ORDINALITY AS t(c, i)
        ORDER BY i
    );
    n := cardinality(codes);
    FOR s IN 0..15 LOOP
        mult := 16777619 + 2 * s;                          -- 0x01000193 + 2s
        h := mod((s + 1)::bigint * 2654435761, 4294967296);  -- (s+1) * 0x9E3779B1 mod 2^32
        FOR i IN 1..n LOOP
            h := mod(h * mult + codes[i] * i, 4294967296);
        END LOOP;
        result := result || ((h::float8 / 2147483648.0 - 1.0)::real);
    END LOOP;
    RETURN result::vector(16);
END
$fn$;
COMMENT ON FUNCTION ragstore.offline_embed(text) IS
    'ragstore offline backend (fingerprint-v1, 16-d): not semantic; bit-identical to the Python backend';
"""

DOWNGRADE = r"""
DO $$
DECLARE t text;
BEGIN
    FOR t IN SELECT table_name FROM ragstore.families LOOP
        EXECUTE 'DROP TABLE IF EXISTS ragstore.' || quote_ident(t);
    END LOOP;
END
$$;
DROP FUNCTION ragstore.offline_embed(text);
DROP TABLE ragstore.chunks;
DROP TABLE ragstore.families;
"""


def upgrade() -> None:
    op.execute(UPGRADE.strip().rstrip(";"))


def downgrade() -> None:
    op.execute(DOWNGRADE.strip().rstrip(";"))
