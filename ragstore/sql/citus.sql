-- Citus: how ragstore's tables are laid out on a distributed PostgreSQL. Run on the coordinator.
-- ragstore.chunks and every family table are distributed on chunk_id and co-located (a chunk's text and
-- its vectors live on the same shard, so the join and the foreign key stay on one node); the registry
-- and the embedding cache are reference tables (a copy on each node). The rest (agent memory and its
-- bindings ragstore.agent_principals, alembic_version) stays on the coordinator as plain tables
-- (ragstore.db.citus says why).
-- Table names come in as parameters (regclass), never spliced.

-- name: is_citus
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')

-- name: is_distributed
-- Whether the table is already laid out as asked: hash-distributed ('h') or a reference table ('n' with
-- replication model 't'). A table with a foreign key to a reference table is first made a "Citus local
-- table" ('n', 's') by Citus itself; that one still has to be distributed.
SELECT EXISTS (
    SELECT 1 FROM pg_catalog.pg_dist_partition
    WHERE logicalrelid = to_regclass(format('ragstore.%%I', %(table)s::text))
      AND CASE WHEN %(reference)s THEN partmethod = 'n' AND repmodel = 't' ELSE partmethod = 'h' END
)

-- name: any_distributed
-- Whether ragstore already has a distributed table here (a schema laid out by an earlier migrate).
SELECT EXISTS (
    SELECT 1 FROM pg_catalog.pg_dist_partition p
    JOIN pg_catalog.pg_class c ON c.oid = p.logicalrelid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'ragstore'
)

-- name: table_exists
SELECT to_regclass(format('ragstore.%%I', %(table)s::text)) IS NOT NULL

-- name: reference_table
SELECT create_reference_table(format('ragstore.%%I', %(table)s::text)::regclass)

-- name: undistribute_table
-- A table that must stay a plain table of the coordinator (ragstore.agent_principals), laid out by an
-- earlier ragstore as a reference table.
SELECT undistribute_table(format('ragstore.%%I', %(table)s::text)::regclass)

-- name: distributed_table
-- colocate_with is 'default' for the first table of a group, else the table it shares shards with.
SELECT create_distributed_table(
    format('ragstore.%%I', %(table)s::text)::regclass, %(column)s, colocate_with => %(colocate_with)s)

-- name: family_tables
SELECT table_name FROM ragstore.families ORDER BY name

-- name: drop_family_views
-- Families have no view on Citus (docs/guide/sql.md): those of a single-node database moved to Citus go
-- before its tables are laid out.
DO $drop$
DECLARE
    f record;
BEGIN
    FOR f IN SELECT name FROM ragstore.families LOOP
        EXECUTE format('DROP VIEW IF EXISTS ragstore.%I', 'vectors_' || f.name);
    END LOOP;
END
$drop$

-- name: shard_placements
-- Where a table's shards live: one row per shard, with its node.
SELECT shardid, nodename, nodeport
FROM pg_catalog.citus_shards
WHERE table_name = format('ragstore.%%I', %(table)s::text)::regclass
ORDER BY shardid

-- name: chunk_foreign_keys
-- A family table's foreign keys to ragstore.chunks (dropped while chunks is distributed, then re-added).
SELECT conname::text, pg_catalog.pg_get_constraintdef(oid)
FROM pg_catalog.pg_constraint
WHERE conrelid = to_regclass(format('ragstore.%%I', %(table)s::text))
  AND contype = 'f' AND confrelid = 'ragstore.chunks'::regclass

-- name: drop_count_triggers
-- Citus distributes no table with triggers: the triggers on ragstore.chunks that keep the chunk-count
-- ledger and the full-text postings (ragstore/sql/schema.sql, for full text on one node) are dropped
-- before chunks is distributed, and so is the postings' foreign key (a local table referencing it): the
-- postings table is then distributed co-located with chunks. On Citus full text and hybrid search read
-- the chunks' tsv instead of the postings and the ledger (ragstore/sql/hybrid_citus.sql).
DROP TRIGGER IF EXISTS chunks_count_insert ON ragstore.chunks;
DROP TRIGGER IF EXISTS chunks_count_delete ON ragstore.chunks;
DROP TRIGGER IF EXISTS chunks_count_truncate ON ragstore.chunks;
DROP TRIGGER IF EXISTS chunks_terms_update ON ragstore.chunks;
ALTER TABLE IF EXISTS ragstore.chunk_terms DROP CONSTRAINT IF EXISTS chunk_terms_chunk_fkey

-- name: drop_registry_triggers
-- Nor a reference table with triggers: the registry's triggers that delete a dropped or created family's
-- full-text statistics (section bindings of ragstore/sql/schema.sql) go before ragstore.families becomes
-- one; on Citus nothing keeps those statistics (the chunk triggers are dropped too, above).
DROP TRIGGER IF EXISTS families_stats_drop ON ragstore.families;
DROP TRIGGER IF EXISTS families_stats_create ON ragstore.families

-- name: sequential
-- Citus refuses, in one transaction, parallel multi-shard work on a table with a foreign key to a
-- reference table next to a write of that reference table, or parallel DDL after a read of it: the
-- bulk-load functions (ragstore.family_bulk_*) read the registry ragstore.families before changing an
-- index of the family table; a family migration's swap writes the family table's shards, then the
-- registry. In this mode the transaction's multi-shard statements run shard by shard over one
-- connection per worker.
SET LOCAL citus.multi_shard_modify_mode = 'sequential'
