-- The framework adapters (ragstore.integrations): reading and deleting one family's chunks by id or by
-- document. A chunk's rows in the family table go with it (ON DELETE CASCADE).

-- name: get_by_ids
SELECT c.chunk_id, c.package_path, c.text, c.metadata
FROM ragstore.chunks AS c
WHERE c.family = %(family)s AND c.chunk_id = ANY (%(ids)s::text[])
ORDER BY c.chunk_id

-- name: delete_ids
DELETE FROM ragstore.chunks WHERE family = %(family)s AND chunk_id = ANY (%(ids)s::text[])

-- name: delete_packages
DELETE FROM ragstore.chunks WHERE family = %(family)s AND package_path = ANY (%(packages)s::text[])

-- name: delete_all
DELETE FROM ragstore.chunks WHERE family = %(family)s

-- name: count
SELECT count(*) FROM ragstore.chunks WHERE family = %(family)s
