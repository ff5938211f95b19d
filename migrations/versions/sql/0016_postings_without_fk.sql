-- Revision 0016: the full-text postings are kept by the chunk triggers alone, without a foreign key.
--
-- ragstore.chunk_terms (revision 0012) referenced ragstore.chunks with ON DELETE CASCADE. A foreign key
-- is checked row by row: every posting inserted paid one lookup in the chunks' primary key, and a chunk
-- has one posting per distinct word (about 50 for a paragraph of prose), so the check cost more than
-- the COPY of the chunks themselves (measured in benchmarks/README.md, "Full-text postings on the write
-- path"). The postings are written only by the SECURITY DEFINER trigger functions on ragstore.chunks; the
-- delete and truncate triggers now remove a deleted chunk's postings in one set-based statement, which is
-- what the cascade did one row at a time.

-- section: upgrade
ALTER TABLE ragstore.chunk_terms DROP CONSTRAINT IF EXISTS chunk_terms_chunk_fkey;

CREATE OR REPLACE FUNCTION ragstore.chunks_count_deleted() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, ragstore AS $fn$
BEGIN
    DELETE FROM ragstore.chunk_terms AS t
    USING old_rows AS o WHERE t.family = o.family AND t.chunk_id = o.chunk_id;
    INSERT INTO ragstore.family_chunk_deltas (family, delta, tokens)
    SELECT o.family, -count(*), -sum(t.tf) FROM old_rows AS o
    CROSS JOIN LATERAL ragstore.tsv_terms(o.tsv) AS t WHERE t.lexeme = '' GROUP BY o.family;
    RETURN NULL;
END
$fn$;

CREATE OR REPLACE FUNCTION ragstore.chunks_count_truncated() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, ragstore AS $fn$
BEGIN
    -- DELETE, not TRUNCATE: a TRUNCATE of ragstore.chunks that names the postings too holds them in use.
    DELETE FROM ragstore.chunk_terms;
    DELETE FROM ragstore.family_chunk_deltas;
    RETURN NULL;
END
$fn$;

-- section: downgrade
-- Then the migration re-runs 0012's chunks_count_deleted and 0010's chunks_count_truncated.
DELETE FROM ragstore.chunk_terms AS t
WHERE NOT EXISTS (SELECT 1 FROM ragstore.chunks AS c WHERE c.family = t.family AND c.chunk_id = t.chunk_id);
ALTER TABLE ragstore.chunk_terms ADD CONSTRAINT chunk_terms_chunk_fkey FOREIGN KEY (family, chunk_id)
    REFERENCES ragstore.chunks (family, chunk_id) ON DELETE CASCADE
