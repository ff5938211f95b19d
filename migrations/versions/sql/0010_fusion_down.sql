-- Revision 0010 undone: the functions it added go, the chunk count and its triggers go, and
-- ragstore.hybrid_search is 0007's again (restored by re-running that revision's definition).
DROP FUNCTION IF EXISTS ragstore.search_auto(text, text, vector, integer);
DROP FUNCTION IF EXISTS ragstore.fts_search(text, text, integer);
DROP TRIGGER IF EXISTS chunks_count_insert ON ragstore.chunks;
DROP TRIGGER IF EXISTS chunks_count_delete ON ragstore.chunks;
DROP TRIGGER IF EXISTS chunks_count_truncate ON ragstore.chunks;
DROP FUNCTION IF EXISTS ragstore.chunks_count_inserted();
DROP FUNCTION IF EXISTS ragstore.chunks_count_deleted();
DROP FUNCTION IF EXISTS ragstore.chunks_count_truncated();
DROP TABLE IF EXISTS ragstore.family_chunk_deltas;
