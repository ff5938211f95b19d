-- What a family holds, chunk by chunk (ragstore delete|get|list|export, Store.delete|get|list_chunks|export,
-- and the framework adapters' deletes). Every statement names the family: another family's chunks, even
-- of the same chunk_id or package_path, are never read or touched. A chunk's row in the family table goes
-- with it (ON DELETE CASCADE); the delete trigger keeps the family's word counts (BM25) exact.
-- %(prefixes)s are LIKE patterns made by ragstore.common.like.like_prefix (wildcards escaped).
-- The order of a listing is (package_path, chunk_id) in the C collation: byte order, the same on any server.

-- Each delete_* statement returns what it deleted per package (a jsonb object: package_path -> count) and
-- the ids given that the family does not hold (delete_ids only). A delete runs them in one transaction,
-- each with its own index: the primary key for ids, (family, package_path) for packages; a LIKE prefix
-- reads the family's rows, as a prune does. A preview_* statement counts the same rows without deleting
-- them, leaving out those an earlier kind already counts, so the counts add up as the deletes' do.

-- name: delete_ids
WITH gone AS (
    DELETE FROM ragstore.chunks AS c
    WHERE c.family = %(family)s AND c.chunk_id = ANY (%(ids)s::text[])
    RETURNING c.chunk_id, c.package_path
)
SELECT (SELECT coalesce(jsonb_object_agg(p.package_path, p.n), '{}'::jsonb)
        FROM (SELECT package_path, count(*) AS n FROM gone GROUP BY package_path) AS p),
       ARRAY(SELECT i.chunk_id FROM unnest(%(ids)s::text[]) AS i (chunk_id)
             WHERE NOT EXISTS (SELECT 1 FROM gone AS g WHERE g.chunk_id = i.chunk_id)
             ORDER BY 1)

-- name: delete_packages
WITH gone AS (
    DELETE FROM ragstore.chunks AS c
    WHERE c.family = %(family)s AND c.package_path = ANY (%(packages)s::text[])
    RETURNING c.package_path
)
SELECT coalesce(jsonb_object_agg(p.package_path, p.n), '{}'::jsonb), ARRAY[]::text[]
FROM (SELECT package_path, count(*) AS n FROM gone GROUP BY package_path) AS p

-- name: delete_prefixes
WITH gone AS (
    DELETE FROM ragstore.chunks AS c
    WHERE c.family = %(family)s AND c.package_path LIKE ANY (%(prefixes)s::text[])
    RETURNING c.package_path
)
SELECT coalesce(jsonb_object_agg(p.package_path, p.n), '{}'::jsonb), ARRAY[]::text[]
FROM (SELECT package_path, count(*) AS n FROM gone GROUP BY package_path) AS p

-- name: delete_all
-- Every chunk of the family (the adapters' delete of everything).
WITH gone AS (
    DELETE FROM ragstore.chunks AS c WHERE c.family = %(family)s RETURNING c.package_path
)
SELECT coalesce(jsonb_object_agg(p.package_path, p.n), '{}'::jsonb), ARRAY[]::text[]
FROM (SELECT package_path, count(*) AS n FROM gone GROUP BY package_path) AS p

-- name: preview_ids
WITH hit AS (
    SELECT c.chunk_id, c.package_path
    FROM ragstore.chunks AS c
    WHERE c.family = %(family)s AND c.chunk_id = ANY (%(ids)s::text[])
)
SELECT (SELECT coalesce(jsonb_object_agg(p.package_path, p.n), '{}'::jsonb)
        FROM (SELECT package_path, count(*) AS n FROM hit GROUP BY package_path) AS p),
       ARRAY(SELECT i.chunk_id FROM unnest(%(ids)s::text[]) AS i (chunk_id)
             WHERE NOT EXISTS (SELECT 1 FROM hit AS h WHERE h.chunk_id = i.chunk_id)
             ORDER BY 1)

-- name: preview_packages
SELECT coalesce(jsonb_object_agg(p.package_path, p.n), '{}'::jsonb), ARRAY[]::text[]
FROM (SELECT c.package_path, count(*) AS n
      FROM ragstore.chunks AS c
      WHERE c.family = %(family)s AND c.package_path = ANY (%(packages)s::text[])
        AND NOT c.chunk_id = ANY (%(ids)s::text[])
      GROUP BY c.package_path) AS p

-- name: preview_prefixes
SELECT coalesce(jsonb_object_agg(p.package_path, p.n), '{}'::jsonb), ARRAY[]::text[]
FROM (SELECT c.package_path, count(*) AS n
      FROM ragstore.chunks AS c
      WHERE c.family = %(family)s AND c.package_path LIKE ANY (%(prefixes)s::text[])
        AND NOT c.chunk_id = ANY (%(ids)s::text[]) AND NOT c.package_path = ANY (%(packages)s::text[])
      GROUP BY c.package_path) AS p

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
