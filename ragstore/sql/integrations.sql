-- The framework adapters (ragstore.integrations): reading one family's chunks by id, and counting them.
-- Their deletes are ragstore.families.chunks.delete_chunks (ragstore/sql/chunks.sql).

-- name: get_by_ids
SELECT c.chunk_id, c.package_path, c.text, c.metadata
FROM ragstore.chunks AS c
WHERE c.family = %(family)s AND c.chunk_id = ANY (%(ids)s::text[])
ORDER BY c.chunk_id

-- name: count
SELECT count(*) FROM ragstore.chunks WHERE family = %(family)s

-- name: delete_document
-- The nodes of LlamaIndex document %(document)s: stored under it as their package_path AND naming it as their
-- source (relationship "1" of the node record LlamaIndex keeps in _node_content). A node of no document is
-- stored under its own id, which may equal a document's: it is not one of that document's nodes.
DELETE FROM ragstore.chunks AS c
WHERE c.family = %(family)s AND c.package_path = %(document)s
  AND (c.metadata ->> '_node_content')::jsonb #>> '{relationships,1,node_id}' = %(document)s
