-- ragstore.memory_forget_log_identity, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- The log's identity columns are the database's, whatever an INSERT says: the login role and the role
-- that ran the erasure (SECURITY INVOKER all the way from memory_forget, so current_user is that role).
-- Called by: the row trigger memory_forget_log_identity on ragstore.memory_forget_log.

CREATE OR REPLACE FUNCTION ragstore.memory_forget_log_identity() RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog AS $fn$
BEGIN
    NEW.forgotten_by := session_user;
    NEW.acting_role := current_user;
    NEW.forgotten_at := now();
    RETURN NEW;
END
$fn$;
