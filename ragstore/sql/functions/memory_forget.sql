-- ragstore.memory_forget, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- The legal-erasure path: the owner side only (EXECUTE is granted to ragstore_owner alone, and the
-- function checks again), logged by the trigger ragstore.memory_append_only.
-- Called by: the owner side only (EXECUTE revoked from PUBLIC; the function checks again).

CREATE OR REPLACE FUNCTION ragstore.memory_forget(p_agent text, p_id text, p_reason text)
RETURNS SETOF ragstore.memory_forget_log
LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog AS $fn$
DECLARE
    deleted integer;
BEGIN
    IF NOT ragstore.acts_as_owner() THEN
        RAISE EXCEPTION USING
            MESSAGE = 'ragstore.memory_forget: only ragstore_owner (or a superuser) erases memory records',
            ERRCODE = 'insufficient_privilege';
    END IF;
    IF p_reason IS NULL OR p_reason !~ '\S' THEN
        RAISE EXCEPTION 'ragstore.memory_forget: a reason is required' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM set_config('ragstore.forget', 'on', true);
    PERFORM set_config('ragstore.forget_reason', p_reason, true);
    DELETE FROM ragstore.memory WHERE agent = p_agent AND id = p_id;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    PERFORM set_config('ragstore.forget', '', true);
    PERFORM set_config('ragstore.forget_reason', '', true);
    IF deleted > 0 THEN
        RETURN QUERY SELECT * FROM ragstore.memory_forget_log l
            WHERE l.agent = p_agent AND l.record_id = p_id ORDER BY l.log_id DESC LIMIT 1;
    END IF;
END
$fn$;
REVOKE ALL ON FUNCTION ragstore.memory_forget(text, text, text) FROM PUBLIC;
