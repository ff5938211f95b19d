-- section: upgrade
-- The hash of the input bytes each chunk was written from (see ragstore.ingest.fast): a rerun skips a
-- record whose hash it finds here without parsing it.
ALTER TABLE ragstore.chunks ADD COLUMN IF NOT EXISTS source_sha256 bytea;
CREATE INDEX IF NOT EXISTS chunks_source_sha256 ON ragstore.chunks (source_sha256)
    WHERE source_sha256 IS NOT NULL;

-- section: downgrade
DROP INDEX IF EXISTS ragstore.chunks_source_sha256;
ALTER TABLE ragstore.chunks DROP COLUMN IF EXISTS source_sha256;
