-- ragstore.memory_append_only, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- Append-only, with one exception: a DELETE on ragstore.memory by the owner side inside
-- ragstore.memory_forget (the transaction-local ragstore.forget flag marks that path and guards against
-- accidents; it is no permission: the role must act as the owner, and app and reader hold no DELETE).
-- SECURITY INVOKER, so current_user is the role that deletes and the log records it.
-- Called by: the row and statement triggers on ragstore.memory and ragstore.memory_forget_log.

CREATE OR REPLACE FUNCTION ragstore.memory_append_only() RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog AS $fn$
DECLARE
    reason text;
BEGIN
    IF TG_LEVEL = 'ROW' AND TG_OP = 'DELETE' AND TG_TABLE_NAME = 'memory'
       AND coalesce(current_setting('ragstore.forget', true), '') = 'on'
       AND ragstore.acts_as_owner() THEN
        reason := coalesce(current_setting('ragstore.forget_reason', true), '');
        IF reason !~ '\S' THEN
            RAISE EXCEPTION 'ragstore.memory: an erasure needs a reason'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        INSERT INTO ragstore.memory_forget_log (agent, store, record_id, reason, acting_role)
        VALUES (OLD.agent, OLD.store, OLD.id, reason, current_user);
        RETURN OLD;
    END IF;
    RAISE EXCEPTION USING
        MESSAGE = 'ragstore.' || TG_TABLE_NAME || ': append-only, ' || TG_OP || ' refused',
        ERRCODE = 'insufficient_privilege',
        HINT = 'the owner erases a memory record with ragstore.memory_forget(agent, id, reason)';
END
$fn$;
