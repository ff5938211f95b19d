-- The bearer tokens of `ragstore serve` (ragstore/serve/tokens.py), in ragstore.api_tokens (schema.sql).
-- Managing and reading them is the owner side's: the table grants nothing to ragstore_app or
-- ragstore_reader, so the server logs in as a member of ragstore_owner (docs/guide/serve.md).

-- name: role_check
-- Whether role %(role)s exists, is a superuser, and has the privileges of one of the three ragstore roles.
SELECT r.rolsuper,
       pg_catalog.pg_has_role(r.oid, 'ragstore_owner', 'USAGE')
       OR pg_catalog.pg_has_role(r.oid, 'ragstore_app', 'USAGE')
       OR pg_catalog.pg_has_role(r.oid, 'ragstore_reader', 'USAGE') AS ragstore_member
FROM pg_catalog.pg_roles AS r
WHERE r.rolname = %(role)s

-- name: insert
INSERT INTO ragstore.api_tokens (name, role, token_sha256)
VALUES (%(name)s, %(role)s, %(sha256)s)
RETURNING id, created_at

-- name: list
SELECT id, name, role, created_at, last_used_at, revoked_at
FROM ragstore.api_tokens
ORDER BY id

-- name: revoke
-- The token named %(name)s, or with id %(id)s, that is not revoked yet.
UPDATE ragstore.api_tokens SET revoked_at = now()
WHERE revoked_at IS NULL AND (name = %(name)s OR id = %(id)s)
RETURNING id, name

-- name: lookup
-- The role and the SHA-256 of the secret of token %(id)s when it is not revoked (no row otherwise).
SELECT role, token_sha256 FROM ragstore.api_tokens WHERE id = %(id)s AND revoked_at IS NULL

-- name: used
-- At most once a minute, so that a busy server does not write on every request.
UPDATE ragstore.api_tokens SET last_used_at = now()
WHERE id = %(id)s AND revoked_at IS NULL AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
