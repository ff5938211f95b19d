-- Revision 0009 undone: the family tables drop their copy of the metadata (and its index with it).
DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT t.table_name
        FROM ragstore.families AS f
        CROSS JOIN LATERAL (VALUES (f.table_name), (f.options -> 'target' ->> 'table')) AS t (table_name)
        WHERE t.table_name IS NOT NULL AND to_regclass(format('ragstore.%I', t.table_name)) IS NOT NULL
    LOOP
        EXECUTE format('ALTER TABLE ragstore.%I DROP COLUMN IF EXISTS metadata', r.table_name);
    END LOOP;
END
$do$
