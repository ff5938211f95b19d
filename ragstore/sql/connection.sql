-- A connection's session, read to open a second connection like it (ragstore.db.connection).

-- name: session
-- The role the session acts as (SET ROLE), the role it logged in as, and two settings the second
-- connection copies.
SELECT current_user::text, session_user::text, current_setting('search_path'), current_setting('statement_timeout')

-- name: copy_session
SELECT set_config('search_path', %s, false), set_config('statement_timeout', %s, false)
