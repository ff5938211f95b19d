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

-- name: delete_document
-- The nodes of LlamaIndex document %(document)s: stored under it as their package_path AND naming it as their
-- source (relationship "1" of the node record LlamaIndex keeps in _node_content). A node of no document is
-- stored under its own id, which may equal a document's: it is not one of that document's nodes.
DELETE FROM ragstore.chunks AS c
WHERE c.family = %(family)s AND c.package_path = %(document)s
  AND (c.metadata ->> '_node_content')::jsonb #>> '{relationships,1,node_id}' = %(document)s
