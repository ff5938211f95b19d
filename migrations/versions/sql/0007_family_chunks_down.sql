-- Revision 0007 down to 0006: back to one chunk table shared by every family, keyed by chunk_id alone.
--
-- Where two families hold one chunk_id, the row of the family first by name is kept, and the other
-- families' rows for that id whose content hash differs from the kept text are deleted (a family never
-- serves a vector that is not the embedding of the text it returns); re-index those families after
-- upgrading again. Cache rows keyed with an endpoint are deleted: revision 0006 keys could not tell
-- endpoints apart.

DELETE FROM ragstore.embedding_cache WHERE model LIKE '%@%';
COMMENT ON TABLE ragstore.embedding_cache IS
    'ragstore embedding cache: model key "backend:model:dim" + sha256 of the text -> its vector';

CREATE TEMPORARY TABLE ragstore_0007_tables ON COMMIT DROP AS
SELECT f.name AS family, t.table_name
FROM ragstore.families AS f
CROSS JOIN LATERAL (VALUES (f.table_name), (f.options -> 'target' ->> 'table')) AS t (table_name)
WHERE t.table_name IS NOT NULL AND to_regclass(format('ragstore.%I', t.table_name)) IS NOT NULL;

DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT con.conrelid::regclass AS tbl, con.conname
        FROM pg_constraint AS con
        WHERE con.contype = 'f' AND con.confrelid = 'ragstore.chunks'::regclass
    LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', r.tbl, r.conname);
    END LOOP;
END
$do$;

DELETE FROM ragstore.chunks AS c
WHERE EXISTS (SELECT 1 FROM ragstore.chunks AS o WHERE o.chunk_id = c.chunk_id AND o.family < c.family);

DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT * FROM ragstore_0007_tables LOOP
        EXECUTE format(
            'DELETE FROM ragstore.%I AS e WHERE NOT EXISTS ('
            'SELECT 1 FROM ragstore.chunks AS c WHERE c.chunk_id = e.chunk_id '
            'AND c.content_sha256 = e.content_sha256)',
            r.table_name);
        EXECUTE format('ALTER TABLE ragstore.%I DROP COLUMN family', r.table_name);
    END LOOP;
END
$do$;

ALTER TABLE ragstore.chunks DROP CONSTRAINT chunks_pkey;
ALTER TABLE ragstore.chunks DROP CONSTRAINT chunks_family_fkey;
DROP INDEX ragstore.chunks_family_package_path_idx;
ALTER TABLE ragstore.chunks DROP COLUMN family;
ALTER TABLE ragstore.chunks ADD PRIMARY KEY (chunk_id);
CREATE INDEX chunks_package_path_idx ON ragstore.chunks (package_path text_pattern_ops);
COMMENT ON TABLE ragstore.chunks IS 'ragstore chunks: text, metadata and full text, shared by all families';

DO $do$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT * FROM ragstore_0007_tables LOOP
        EXECUTE format(
            'ALTER TABLE ragstore.%I ADD FOREIGN KEY (chunk_id) REFERENCES ragstore.chunks (chunk_id) '
            'ON DELETE CASCADE', r.table_name);
    END LOOP;
END
$do$;
DROP TABLE ragstore_0007_tables;

-- The functions as revisions 0002 and 0005 made them are restored by the migration from those revisions'
-- own frozen files (sql/0002_search.sql, sql/0005_hybrid.sql).
