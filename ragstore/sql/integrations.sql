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

-- name: server_clock
-- The server's clock before a LlamaIndex add writes anything: every row that add writes carries a later
-- updated_at (each write transaction's now()), so delete_earlier_nodes below never removes them.
SELECT clock_timestamp()

-- name: delete_earlier_nodes
-- After a LlamaIndex add of the nodes %(ids)s (committed), the copies an earlier add left of the same
-- nodes, which LlamaIndex's splitter wrote under other ids: among the stored nodes of the documents the
-- given nodes name as their source (%(nodes)s, each node's _node_content as text, and its %(texts)s), a
-- stored node of the same document goes when it was written before %(since)s (the add's start) and either
--   * it was split from another version of the document (both name a source hash, and they differ), or
--   * it is the same node of the same version: same text, same node record apart from its id and its
--     links to other nodes (the node's offsets in the document, its metadata and templates included).
-- A node of no document, a node whose record names no source, and every other document's or family's
-- node stay. Two adds racing over the same nodes cannot remove each other's copies (each removes only
-- rows older than its own start, and its own copies are newer): at worst a copy survives until the next add.
WITH given AS (
    SELECT g.document, g.node::jsonb AS node, g.text
    FROM unnest(%(documents)s::text[], %(nodes)s::text[], %(texts)s::text[]) AS g(document, node, text)
), sides AS (
    SELECT NULL::text AS chunk_id, g.document, g.node, g.text
    FROM given AS g
    UNION ALL
    SELECT c.chunk_id, c.package_path, (c.metadata ->> '_node_content')::jsonb, c.text
    FROM ragstore.chunks AS c
    WHERE c.family = %(family)s AND c.package_path = ANY (%(documents)s::text[])
      AND c.chunk_id <> ALL (%(ids)s::text[]) AND c.updated_at < %(since)s
      AND c.metadata ->> '_node_content' IS JSON OBJECT
), keyed AS (
    SELECT s.chunk_id, s.document, s.text,
           s.node #>> '{relationships,1,hash}' AS version,
           s.node - 'id_' - 'relationships' - 'embedding' AS identity
    FROM sides AS s
    WHERE s.node #>> '{relationships,1,node_id}' = s.document
), doomed AS (
    -- split from another version of the document
    SELECT old.chunk_id
    FROM keyed AS old
    JOIN (SELECT DISTINCT document, version FROM keyed WHERE chunk_id IS NULL AND version IS NOT NULL) AS v
      ON v.document = old.document AND v.version <> old.version
    WHERE old.chunk_id IS NOT NULL
    UNION
    -- the same node of the same version (a hash join on document, text and record)
    SELECT old.chunk_id
    FROM keyed AS old
    JOIN keyed AS new
      ON new.document = old.document AND new.text = old.text AND new.identity = old.identity
     AND new.version IS NOT DISTINCT FROM old.version
    WHERE old.chunk_id IS NOT NULL AND new.chunk_id IS NULL
)
DELETE FROM ragstore.chunks AS c
USING doomed AS d
WHERE c.family = %(family)s AND c.chunk_id = d.chunk_id
