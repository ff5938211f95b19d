-- Revision 0009: each family table keeps a copy of its chunks' metadata beside the vectors.
--
-- A metadata filter then reads the family table alone, through a GIN (jsonb_path_ops) index, as a
-- package filter reads it through its btree: no lookup of each matching chunk in ragstore.chunks. The
-- writer keeps the copy equal to ragstore.chunks.metadata (its merge and its package/metadata sync).
-- Every family table is converted: the serving table of each family and the table a model migration is
-- building (the next catch-up of that migration copies any metadata changed meanwhile).

DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT f.name AS family, t.table_name
        FROM ragstore.families AS f
        CROSS JOIN LATERAL (VALUES (f.table_name), (f.options -> 'target' ->> 'table')) AS t (table_name)
        WHERE t.table_name IS NOT NULL AND to_regclass(format('ragstore.%I', t.table_name)) IS NOT NULL
    LOOP
        EXECUTE format(
            'ALTER TABLE ragstore.%I ADD COLUMN IF NOT EXISTS metadata jsonb NOT NULL DEFAULT ''{}''::jsonb',
            r.table_name);
        EXECUTE format(
            'UPDATE ragstore.%I AS e SET metadata = c.metadata FROM ragstore.chunks AS c '
            'WHERE c.family = %L AND c.chunk_id = e.chunk_id AND c.metadata <> ''{}''::jsonb',
            r.table_name, r.family);
        EXECUTE format(
            'CREATE INDEX IF NOT EXISTS %I ON ragstore.%I USING gin (metadata jsonb_path_ops)',
            r.table_name || '_metadata', r.table_name);
        EXECUTE format('ANALYZE ragstore.%I', r.table_name);
    END LOOP;
END
$do$
