-- The source registry of folder documents (ragstore.family_sources): which root (the
-- folder's resolved absolute path, and the host) last wrote each package prefix of a family. Read and
-- written by ragstore/ingest/roots.py, listed by `ragstore family show`.

-- name: roots_of_prefixes
SELECT prefix, root, host
FROM ragstore.family_sources
WHERE family = %(family)s AND prefix = ANY (%(prefixes)s::text[])
ORDER BY prefix

-- name: register_new
-- The prefixes no root wrote yet become this run's; the ones already registered are returned by
-- lock_prefixes below, locked until the run's claim commits (a concurrent run of another root waits, then
-- sees this one's root).
INSERT INTO ragstore.family_sources (family, prefix, root, host)
SELECT %(family)s, p.prefix, p.root, p.host
FROM unnest(%(prefixes)s::text[], %(roots)s::text[], %(hosts)s::text[]) AS p (prefix, root, host)
ON CONFLICT (family, prefix) DO NOTHING
RETURNING prefix

-- name: lock_prefixes
SELECT prefix, root, host
FROM ragstore.family_sources
WHERE family = %(family)s AND prefix = ANY (%(prefixes)s::text[])
ORDER BY prefix
FOR UPDATE

-- name: written_again
UPDATE ragstore.family_sources
SET last_written = now()
WHERE family = %(family)s AND prefix = ANY (%(prefixes)s::text[])

-- name: take_over
-- --replace-root: the prefix is this root's from now on (its first write is this one).
UPDATE ragstore.family_sources
SET root = %(root)s, host = %(host)s, first_written = now(), last_written = now()
WHERE family = %(family)s AND prefix = %(prefix)s

-- name: list_sources
SELECT prefix, root, host, first_written, last_written
FROM ragstore.family_sources
WHERE family = %(family)s
ORDER BY prefix
