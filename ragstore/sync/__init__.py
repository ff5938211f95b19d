"""``ragstore sync``: families that follow tables of the same database (docs/guide/sync.md)."""
