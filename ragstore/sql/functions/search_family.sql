-- ragstore.search_family, kept whole here and re-applied by `ragstore migrate` when this file changes (see README.md).
--
-- ragstore.search_family(caller, family, k): the family's registry row for a search function named
-- caller, after checking k (1 to 1000) and that the family exists; one message shape for every caller.
-- Called by: everyone (the search functions).

CREATE OR REPLACE FUNCTION ragstore.search_family(caller text, family text, k integer) RETURNS ragstore.families
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $fn$
DECLARE
    fam ragstore.families%ROWTYPE;
BEGIN
    IF k IS NULL OR k < 1 OR k > 1000 THEN
        RAISE EXCEPTION '%: k must be an integer from 1 to 1000, got %', caller, k
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO fam FROM ragstore.families AS f WHERE f.name = search_family.family;
    IF NOT FOUND THEN
        RAISE EXCEPTION '%: no family named %', caller, family USING ERRCODE = 'undefined_object';
    END IF;
    RETURN fam;
END
$fn$;
COMMENT ON FUNCTION ragstore.search_family(text, text, integer) IS
    'ragstore: a search function''s family row, after checking k (1 to 1000) and that the family exists';
