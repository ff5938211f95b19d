-- Revision 0002_family_views (migrations/versions/0002_family_views.py): every family gets its stable SQL
-- name, the view ragstore.vectors_<family>, as `ragstore family create` makes it (ragstore/sql/families.sql,
-- block create_view; this is a frozen copy). Not on Citus, where families have no view.

-- section: upgrade
DO $up$
DECLARE
    f record;
    v text;
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    FOR f IN SELECT name, table_name FROM ragstore.families ORDER BY name LOOP
        v := 'vectors_' || f.name;
        EXECUTE format(
            'CREATE OR REPLACE VIEW ragstore.%I WITH (security_invoker = true) AS '
            'SELECT e.chunk_id, e.package_path, c.text, c.metadata, e.embedding::vector AS embedding, e.model '
            'FROM ragstore.%I AS e JOIN ragstore.chunks AS c ON c.family = %L AND c.chunk_id = e.chunk_id',
            v, f.table_name, f.name);
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'ragstore_owner')
           AND pg_catalog.pg_has_role(current_user, 'ragstore_owner', 'SET') THEN
            EXECUTE format('ALTER VIEW ragstore.%I OWNER TO ragstore_owner', v);
        END IF;
        IF (SELECT count(*) FROM pg_catalog.pg_roles WHERE rolname IN ('ragstore_app', 'ragstore_reader')) = 2 THEN
            EXECUTE format('GRANT SELECT ON ragstore.%I TO ragstore_app, ragstore_reader', v);
        END IF;
    END LOOP;
END
$up$

-- section: downgrade
DO $down$
DECLARE
    f record;
BEGIN
    FOR f IN SELECT name FROM ragstore.families LOOP
        EXECUTE format('DROP VIEW IF EXISTS ragstore.%I', 'vectors_' || f.name);
    END LOOP;
END
$down$
