-- The write path on Citus: the blocks of ingest.sql that join a distributed table to the session's
-- staging tables (temporary tables live on the coordinator only, and Citus refuses such a join in an
-- UPDATE or DELETE). The ids come as an array parameter instead; the rest is ingest.sql's.

-- name: sync_package_path
-- A chunk of this batch that moved to another package keeps its vector; the family table's copy of
-- package_path follows its chunk (a co-located join on chunk_id, run on every shard).
UPDATE ragstore.{table} AS e
SET package_path = c.package_path
FROM ragstore.chunks AS c
WHERE c.family = %(family)s AND c.chunk_id = e.chunk_id AND e.chunk_id = ANY (%(ids)s::text[])
  AND e.package_path IS DISTINCT FROM c.package_path

-- name: prune
-- The family's chunks of the packages this run read (or of the folders it walked) that the input no
-- longer has (%(seen)s: every chunk_id of the run); other families' chunks are never candidates.
DELETE FROM ragstore.chunks AS c
WHERE c.family = %(family)s
  AND (c.package_path = ANY (%(packages)s::text[]) OR c.package_path LIKE ANY (%(prefixes)s::text[]))
  AND NOT (c.chunk_id = ANY (%(seen)s::text[]))
