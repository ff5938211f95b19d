-- Revision 0013: the GIN index on each family table's metadata copy keeps no pending list.
--
-- A search with a metadata filter reads the GIN index's pending list whole before the index itself; with
-- fastupdate off there is none: a write inserts into the index directly. Every family table is changed:
-- the serving table of each family and the table a model migration is building. The pending list an
-- index holds now is merged into it (gin_clean_pending_list) so that no search reads it again.

-- section: upgrade
DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT DISTINCT t.table_name || '_metadata' AS index_name
        FROM ragstore.families AS f
        CROSS JOIN LATERAL (VALUES (f.table_name), (f.options -> 'target' ->> 'table')) AS t (table_name)
        WHERE t.table_name IS NOT NULL
          AND to_regclass(format('ragstore.%I', t.table_name || '_metadata')) IS NOT NULL
    LOOP
        EXECUTE format('ALTER INDEX ragstore.%I SET (fastupdate = off)', r.index_name);
        PERFORM gin_clean_pending_list(format('ragstore.%I', r.index_name)::regclass);
    END LOOP;
END
$do$;

-- section: downgrade
DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT DISTINCT t.table_name || '_metadata' AS index_name
        FROM ragstore.families AS f
        CROSS JOIN LATERAL (VALUES (f.table_name), (f.options -> 'target' ->> 'table')) AS t (table_name)
        WHERE t.table_name IS NOT NULL
          AND to_regclass(format('ragstore.%I', t.table_name || '_metadata')) IS NOT NULL
    LOOP
        EXECUTE format('ALTER INDEX ragstore.%I RESET (fastupdate)', r.index_name);
    END LOOP;
END
$do$;
