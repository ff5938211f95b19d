-- The framework adapters (ragstore.integrations): reading one family's chunks by id, and counting them.
-- Their deletes are ragstore.families.chunks.delete_chunks (ragstore/sql/chunks.sql).

-- name: get_by_ids
SELECT c.chunk_id, c.package_path, c.text, c.metadata
FROM ragstore.chunks AS c
WHERE c.family = %(family)s AND c.chunk_id = ANY (%(ids)s::text[])
ORDER BY c.chunk_id

-- name: count
SELECT count(*) FROM ragstore.chunks WHERE family = %(family)s
