-- Revision 0004_api_tokens (migrations/versions/0004_api_tokens.py): the bearer tokens of `ragstore serve`,
-- kept hashed, managed by the owner side (ragstore/serve/tokens.py). The same table is in
-- ragstore/sql/schema.sql, section "tables"; its grants (none for ragstore_app and ragstore_reader) are
-- section "grants" there, which a database bridged from the old chain applied before this table existed.
-- This is a frozen copy.

-- section: upgrade
CREATE TABLE ragstore.api_tokens (
    id            bigint GENERATED ALWAYS AS IDENTITY,
    name          text NOT NULL CHECK (name ~ '^[A-Za-z0-9_.-]{1,64}$'),
    role          text NOT NULL CHECK (role ~ '\S'),
    token_sha256  bytea NOT NULL CHECK (length(token_sha256) = 32),
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz,
    revoked_at    timestamptz,
    CONSTRAINT api_tokens_pkey PRIMARY KEY (id)
);
CREATE UNIQUE INDEX api_tokens_live_name ON ragstore.api_tokens (name) WHERE revoked_at IS NULL;
COMMENT ON TABLE ragstore.api_tokens IS
    'ragstore serve: bearer tokens (SHA-256 of the secret), each mapped to a database role; owner-managed';
-- It belongs to ragstore_owner, like everything in the schema, and the default privileges would give the
-- app and the reader rights on it: it is the owner side's alone.
DO $revoke$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'ragstore_owner')
       AND pg_catalog.pg_has_role(current_user, 'ragstore_owner', 'SET') THEN
        ALTER TABLE ragstore.api_tokens OWNER TO ragstore_owner;
    END IF;
    IF (SELECT count(*) FROM pg_catalog.pg_roles WHERE rolname IN ('ragstore_app', 'ragstore_reader')) = 2 THEN
        REVOKE ALL ON ragstore.api_tokens FROM ragstore_app, ragstore_reader;
        REVOKE ALL ON SEQUENCE ragstore.api_tokens_id_seq FROM ragstore_app, ragstore_reader;
    END IF;
END
$revoke$;

-- section: downgrade
DROP TABLE IF EXISTS ragstore.api_tokens
