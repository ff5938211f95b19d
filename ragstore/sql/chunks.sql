-- What a family holds, chunk by chunk (ragstore delete|get|list|export, Store.delete|get|list_chunks|export,
-- and the framework adapters' deletes). Every statement names the family: another family's chunks, even
-- of the same chunk_id or package_path, are never read or touched. A chunk's row in the family table goes
-- with it (ON DELETE CASCADE); the delete trigger keeps the family's word counts (BM25) exact.
-- %(prefixes)s are LIKE patterns made by ragstore.common.like.like_prefix (wildcards escaped).
-- The order of a listing is (package_path, chunk_id) in the C collation: byte order, the same on any server.

-- name: delete_matching
-- The chunks of these ids, of exactly these packages, or under these package_path prefixes; what went, per
-- package, and which of the ids given the family did not hold.
WITH gone AS (
    DELETE FROM ragstore.chunks AS c
    WHERE c.family = %(family)s
      AND (c.chunk_id = ANY (%(ids)s::text[])
           OR c.package_path = ANY (%(packages)s::text[])
           OR c.package_path LIKE ANY (%(prefixes)s::text[]))
    RETURNING c.chunk_id, c.package_path
)
SELECT (SELECT coalesce(jsonb_object_agg(p.package_path, p.n), '{}'::jsonb)
        FROM (SELECT package_path, count(*) AS n FROM gone GROUP BY package_path) AS p),
       ARRAY(SELECT i.chunk_id FROM unnest(%(ids)s::text[]) AS i (chunk_id)
             WHERE NOT EXISTS (SELECT 1 FROM gone AS g WHERE g.chunk_id = i.chunk_id)
             ORDER BY 1)

-- name: preview_matching
-- What delete_matching would delete now (a dry run), in the same shape.
WITH hit AS (
    SELECT c.chunk_id, c.package_path
    FROM ragstore.chunks AS c
    WHERE c.family = %(family)s
      AND (c.chunk_id = ANY (%(ids)s::text[])
           OR c.package_path = ANY (%(packages)s::text[])
           OR c.package_path LIKE ANY (%(prefixes)s::text[]))
)
SELECT (SELECT coalesce(jsonb_object_agg(p.package_path, p.n), '{}'::jsonb)
        FROM (SELECT package_path, count(*) AS n FROM hit GROUP BY package_path) AS p),
       ARRAY(SELECT i.chunk_id FROM unnest(%(ids)s::text[]) AS i (chunk_id)
             WHERE NOT EXISTS (SELECT 1 FROM hit AS h WHERE h.chunk_id = i.chunk_id)
             ORDER BY 1)

-- name: delete_all
-- Every chunk of the family (the adapters' delete of everything), counted per package.
WITH gone AS (
    DELETE FROM ragstore.chunks AS c WHERE c.family = %(family)s RETURNING c.package_path
)
SELECT (SELECT coalesce(jsonb_object_agg(p.package_path, p.n), '{}'::jsonb)
        FROM (SELECT package_path, count(*) AS n FROM gone GROUP BY package_path) AS p),
       ARRAY[]::text[]

-- name: preview_all
SELECT coalesce(jsonb_object_agg(p.package_path, p.n), '{}'::jsonb), ARRAY[]::text[]
FROM (SELECT package_path, count(*) AS n FROM ragstore.chunks WHERE family = %(family)s GROUP BY package_path) AS p

-- name: get_chunks
-- The chunks of these ids, with their vector and its model when {table} holds one.
SELECT c.chunk_id, c.package_path, c.text, c.metadata, e.embedding, e.model
FROM ragstore.chunks AS c
LEFT JOIN ragstore.{table} AS e ON e.chunk_id = c.chunk_id
WHERE c.family = %(family)s AND c.chunk_id = ANY (%(ids)s::text[])

-- name: list_chunks
-- One page of the family's chunks (optionally under a package_path prefix), after the chunk %(after)s
-- when given (keyset: the key of that chunk, which must exist), %(limit)s rows.
SELECT c.chunk_id, c.package_path
FROM ragstore.chunks AS c
WHERE c.family = %(family)s
  AND c.package_path LIKE %(prefix)s
  AND (%(after)s::text IS NULL
       OR (c.package_path COLLATE "C", c.chunk_id COLLATE "C") > (
           SELECT a.package_path COLLATE "C", a.chunk_id COLLATE "C"
           FROM ragstore.chunks AS a WHERE a.family = %(family)s AND a.chunk_id = %(after)s))
ORDER BY c.package_path COLLATE "C", c.chunk_id COLLATE "C"
LIMIT %(limit)s

-- name: count_chunks
-- How many chunks and packages the family holds under a package_path prefix ('%' for all).
SELECT count(*), count(DISTINCT c.package_path)
FROM ragstore.chunks AS c
WHERE c.family = %(family)s AND c.package_path LIKE %(prefix)s

-- name: chunk_exists
SELECT EXISTS (SELECT 1 FROM ragstore.chunks WHERE family = %(family)s AND chunk_id = %(id)s)

-- name: export_chunks
-- Every chunk of the family under a prefix, in listing order, with its vector and model from {table}.
SELECT c.chunk_id, c.package_path, c.text, c.metadata, e.embedding, e.model
FROM ragstore.chunks AS c
LEFT JOIN ragstore.{table} AS e ON e.chunk_id = c.chunk_id
WHERE c.family = %(family)s AND c.package_path LIKE %(prefix)s
ORDER BY c.package_path COLLATE "C", c.chunk_id COLLATE "C"

-- name: export_chunks_text
-- export_chunks without the vectors (no join of the family table).
SELECT c.chunk_id, c.package_path, c.text, c.metadata
FROM ragstore.chunks AS c
WHERE c.family = %(family)s AND c.package_path LIKE %(prefix)s
ORDER BY c.package_path COLLATE "C", c.chunk_id COLLATE "C"
