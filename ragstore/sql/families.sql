-- Family tables. {table} and {index} are filled with psycopg.sql.Identifier; the dimension and the
-- vector type are checked by ragstore.families before they reach this text; {family} is the family's
-- name (checked against ragstore.families.NAME_PATTERN) as a psycopg.sql.Literal.

-- name: create_table
-- A family table holds vectors of its own family's chunks only: the family column is that one name (a
-- DDL default cannot be a parameter), and the foreign key reaches (family, chunk_id) of ragstore.chunks.
CREATE TABLE ragstore.{table} (
    family          text NOT NULL DEFAULT {family} CHECK (family = {family}),
    chunk_id        text PRIMARY KEY,
    package_path    text NOT NULL,
    embedding       {vector_type} NOT NULL,
    model           text NOT NULL,
    content_sha256  bytea NOT NULL,
    metadata        jsonb NOT NULL DEFAULT '{{}}'::jsonb,
    FOREIGN KEY (family, chunk_id) REFERENCES ragstore.chunks (family, chunk_id) ON DELETE CASCADE
)

-- name: create_package_index
CREATE INDEX IF NOT EXISTS {package_index} ON ragstore.{table} (package_path text_pattern_ops)

-- name: create_metadata_index
-- The chunks' metadata is copied beside the vectors (the writer keeps it equal to ragstore.chunks.metadata)
-- so that a metadata filter reads the family table alone, through this index, as a package filter does.
-- fastupdate off: no pending list, which every filtered search would read whole before the index.
CREATE INDEX IF NOT EXISTS {metadata_index} ON ragstore.{table} USING gin (metadata jsonb_path_ops)
    WITH (fastupdate = off)

-- name: create_hnsw_index
-- {index_expression} is the column, or its half-precision or binary-quantized form, as the family's storage
-- says (ragstore/families/storage.py); searches order by the same expression.
CREATE INDEX IF NOT EXISTS {hnsw_index} ON ragstore.{table} USING hnsw ({index_expression} {opclass})
    WITH (m = {m}, ef_construction = {ef_construction})

-- name: create_view
-- The family's stable SQL name, ragstore.vectors_<family>: its chunks with their vectors, from whichever
-- table holds them (a model migration re-points it in the transaction of its swap). The embedding is cast to
-- plain vector (any dimension, halfvec included), so the columns stay the same across models and the view is
-- replaced in place: grants, and views of the user's built on it, survive. security_invoker: the caller's own
-- rights on ragstore.chunks and the family table apply, as if it queried them.
CREATE OR REPLACE VIEW ragstore.{view} WITH (security_invoker = true) AS
SELECT e.chunk_id, e.package_path, c.text, c.metadata, e.embedding::vector AS embedding, e.model
FROM ragstore.{table} AS e
JOIN ragstore.chunks AS c ON c.family = {family} AND c.chunk_id = e.chunk_id

-- name: drop_view
DROP VIEW IF EXISTS ragstore.{view}

-- name: drop_hnsw_index
DROP INDEX IF EXISTS ragstore.{hnsw_index}

-- name: insert_family
INSERT INTO ragstore.families (name, backend, model, dim, vector_type, table_name, options)
VALUES (%(name)s, %(backend)s, %(model)s, %(dim)s, %(vector_type)s, %(table_name)s, %(options)s)

-- name: get_family
SELECT name, backend, model, dim, vector_type, table_name, state, options
FROM ragstore.families
WHERE name = %(name)s

-- name: list_families
SELECT name, backend, model, dim, vector_type, table_name, state, options
FROM ragstore.families
ORDER BY name

-- name: family_stats
SELECT
    (SELECT count(*) FROM ragstore.{table})                          AS rows,
    pg_total_relation_size(format('ragstore.%%I', %(table_name)s::text))   AS total_bytes,
    (SELECT indexrelid::regclass::text
       FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
       JOIN pg_am am ON am.oid = c.relam
      WHERE i.indrelid = format('ragstore.%%I', %(table_name)s::text)::regclass AND am.amname = 'hnsw'
      LIMIT 1)                                                       AS hnsw_index,
    (SELECT pg_relation_size(c.oid)
       FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
       JOIN pg_am am ON am.oid = c.relam
      WHERE i.indrelid = format('ragstore.%%I', %(table_name)s::text)::regclass AND am.amname = 'hnsw'
      LIMIT 1)                                                       AS hnsw_bytes

-- name: delete_family
-- Its chunks go with it (ragstore.chunks.family references the registry ON DELETE CASCADE).
DELETE FROM ragstore.families WHERE name = %(name)s

-- name: fts_config_exists
-- Whether a text-search configuration of that name is visible (what a '<name>'::regconfig cast resolves).
SELECT EXISTS (
    SELECT 1 FROM pg_catalog.pg_ts_config AS c
    WHERE c.cfgname = %(config)s AND pg_catalog.pg_ts_config_is_visible(c.oid)
)

-- name: cluster_by_package
-- Rewrite the family table in package_path order (after a bulk load, before the HNSW build): a filtered
-- exact search then reads its rows from a few contiguous pages instead of one page per row.
CLUSTER ragstore.{table} USING {package_index}

-- name: analyze_table
ANALYZE ragstore.{table}

-- name: filter_key_index
-- A declared filter key (ragstore.families.filter_keys): a btree on the key's JSON value in the family's
-- metadata copy. A filter on the key is rendered with the same expression, (e.metadata -> 'key'), so
-- the planner reads its rows through this index ($eq, $in, ranges) instead of the GIN bitmap. The key is
-- a psycopg.sql.Literal (an index expression cannot hold a parameter); no placeholder may appear in a
-- comment here, where a key holding a line break would end the comment. CONCURRENTLY for a family in
-- use, nothing for the empty table a model migration creates.
CREATE INDEX {concurrently} IF NOT EXISTS {index} ON ragstore.{table} ((metadata -> {key}))

-- name: filter_key_index_covering
-- The covering form of a declared key's index: the columns the exact search over the filtered rows reads
-- are in the index too (the metadata column as well: the planner reads an expression of a column from
-- an index only when the column is in it), so that search is an index-only scan of a few contiguous
-- leaf pages instead of one heap block per row. As large as the table; for vectors up to 512 dimensions
-- (a btree entry holds at most 2,704 bytes). No placeholder may appear in a comment here either.
CREATE INDEX {concurrently} IF NOT EXISTS {index} ON ragstore.{table} ((metadata -> {key}))
    INCLUDE (family, chunk_id, package_path, content_sha256, embedding, metadata)

-- name: drop_filter_key_index
DROP INDEX {concurrently} IF EXISTS ragstore.{index}

-- name: filter_key_index_state
-- The declared key's index: whether it exists and is valid (a CREATE INDEX CONCURRENTLY that failed
-- leaves an invalid index behind, which a retry drops first), and its size.
SELECT i.indisvalid, pg_relation_size(i.indexrelid)
FROM pg_index AS i
WHERE i.indexrelid = to_regclass(format('ragstore.%%I', %(index)s::text))

-- name: vacuum_analyze_table
-- After a covering filter-key index is built, and after a bulk load's clustering of a family that has one:
-- marks the pages all-visible, which an index-only scan needs to skip the heap, and refreshes the
-- statistics. Outside any transaction.
VACUUM (ANALYZE) ragstore.{table}

-- name: lock_family_options
SELECT state, table_name, options FROM ragstore.families WHERE name = %(name)s FOR UPDATE

-- name: set_family_options
UPDATE ragstore.families SET options = %(options)s, updated_at = now() WHERE name = %(name)s

-- name: create_shadow_hnsw_index
-- `family migrate --storage`: the family's index in its new storage, built beside the serving one under
-- {index} (its name with _next) while the family is read and written; {index_expression} and {opclass} as
-- in create_hnsw_index, for the target storage.
CREATE INDEX CONCURRENTLY {index} ON ragstore.{table} USING hnsw ({index_expression} {opclass})
    WITH (m = {m}, ef_construction = {ef_construction})

-- name: drop_index_concurrently
DROP INDEX CONCURRENTLY IF EXISTS ragstore.{index}

-- name: rename_index
-- The swap's renames (in one transaction with the registry's new storage): ALTER INDEX ... RENAME takes
-- no lock that blocks a reader of the table. IF EXISTS: an interrupted bulk load can leave the family
-- without its serving index.
ALTER INDEX IF EXISTS ragstore.{index} RENAME TO {new_name}

-- name: build_size
-- What sizes a build's memory (ragstore/families/build_memory.py): the family table's rows as the planner
-- knows them (NULL before its first VACUUM or ANALYZE) and its bytes (heap and TOAST: what CLUSTER sorts).
SELECT CASE WHEN c.reltuples >= 0 THEN c.reltuples::bigint END, pg_table_size(c.oid)
FROM pg_class AS c
WHERE c.oid = to_regclass(format('ragstore.%%I', %(table)s::text))

-- name: count_rows
SELECT count(*) FROM ragstore.{table}

-- name: set_build_settings
-- A build's memory and parallel workers, for this transaction (is_local) or the session.
SELECT set_config('maintenance_work_mem', %(memory)s, %(is_local)s),
       set_config('max_parallel_maintenance_workers', %(workers)s, %(is_local)s)

-- name: reset_build_settings
-- Back to the server's values for this session (after a build run in autocommit).
SELECT set_config(name, reset_val, false) FROM pg_settings
WHERE name IN ('maintenance_work_mem', 'max_parallel_maintenance_workers')
