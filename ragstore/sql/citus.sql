-- Citus: how ragstore's tables are laid out on a distributed PostgreSQL. Run on the coordinator.
-- ragstore.chunks and every family table are distributed on chunk_id and co-located (a chunk's text and
-- its vectors live on the same shard, so the join and the foreign key stay on one node); memory is
-- distributed on the agent; the small catalogs every node reads are reference tables (a copy on each
-- node). Tables not listed (the embedding cache, the forget log, alembic_version) stay on the coordinator.
-- Table names come in as parameters (regclass), never spliced.

-- name: is_citus
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')

-- name: is_distributed
-- Whether the table is already a Citus table (distributed or reference).
SELECT EXISTS (
    SELECT 1 FROM pg_catalog.pg_dist_partition
    WHERE logicalrelid = to_regclass(format('ragstore.%%I', %(table)s::text))
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

-- name: distributed_table
-- colocate_with is 'default' for the first table of a group, else the table it shares shards with.
SELECT create_distributed_table(
    format('ragstore.%%I', %(table)s::text)::regclass, %(column)s, colocate_with => %(colocate_with)s)

-- name: family_tables
SELECT table_name FROM ragstore.families ORDER BY name

-- name: shard_placements
-- Where a table's shards live: one row per shard, with its node.
SELECT shardid, nodename, nodeport
FROM pg_catalog.citus_shards
WHERE table_name = format('ragstore.%%I', %(table)s::text)::regclass
ORDER BY shardid
