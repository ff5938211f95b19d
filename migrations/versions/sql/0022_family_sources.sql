-- Revision 0022: the source registry of folder documents.
--
-- A folder's documents are named <prefix>/<path under the folder>, the prefix being the folder's name
-- (or the name given with `ragstore index --as`). Two folders of one name (every project has a docs/)
-- would share ids, and a --prune of one would delete the other's documents. Each row says which root (the
-- folder's resolved absolute path, on which host) last wrote a prefix of a family; a run from another root
-- is refused before it writes anything (ragstore/ingest/roots.py, docs/decisions.md).
--
-- The app role records the roots of its own runs (SELECT, INSERT, UPDATE); the reader reads them; rows go
-- with their family.

-- section: upgrade
CREATE TABLE IF NOT EXISTS ragstore.family_sources (
    family         text NOT NULL REFERENCES ragstore.families (name) ON DELETE CASCADE,
    prefix         text NOT NULL CHECK (prefix <> '' AND strpos(prefix, '/') = 0),
    root           text NOT NULL,
    host           text NOT NULL,
    first_written  timestamptz NOT NULL DEFAULT now(),
    last_written   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (family, prefix)
);
COMMENT ON TABLE ragstore.family_sources IS
    'which folder (root path and host) last wrote the documents under each package prefix of a family';

DO $grants$
BEGIN
    IF (SELECT count(*) FROM pg_roles
        WHERE rolname IN ('ragstore_owner', 'ragstore_app', 'ragstore_reader')) < 3 THEN
        RAISE NOTICE 'ragstore: the ragstore roles are missing; ask a DBA to run sql/roles.sql, then migrate again';
        RETURN;
    END IF;
    ALTER TABLE ragstore.family_sources OWNER TO ragstore_owner;
    REVOKE ALL ON ragstore.family_sources FROM ragstore_app, ragstore_reader;
    GRANT SELECT, INSERT, UPDATE ON ragstore.family_sources TO ragstore_app;
    GRANT SELECT ON ragstore.family_sources TO ragstore_reader;
END
$grants$;

-- section: downgrade
DROP TABLE IF EXISTS ragstore.family_sources;
