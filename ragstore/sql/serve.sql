-- `ragstore serve` (ragstore/serve/app.py): what the server asks as its login role.

-- name: may_act_as
-- Whether the login role may SET ROLE to token role %(role)s, which must exist and not be a superuser.
SELECT EXISTS (
    SELECT 1 FROM pg_catalog.pg_roles AS r
    WHERE r.rolname = %(role)s AND NOT r.rolsuper AND pg_catalog.pg_has_role(current_user, r.oid, 'SET')
)
