"""Helpers several test modules share (once in citus/test_citus.py)."""

import hashlib
from typing import Any

import psycopg

from ragstore import families


def digest(conn: psycopg.Connection[Any], family: str) -> str:
    """A content hash of the family's chunks and vectors (everything but timestamps)."""
    table = families.get_family(conn, family).table
    rows = conn.execute(
        psycopg.sql.SQL(
            "SELECT c.chunk_id, c.package_path, c.text, c.metadata::text, c.content_sha256, e.embedding::text, "
            "e.model, e.package_path FROM ragstore.chunks c LEFT JOIN ragstore.{} e "
            "ON e.family = c.family AND e.chunk_id = c.chunk_id WHERE c.family = %s ORDER BY c.chunk_id"
        ).format(psycopg.sql.Identifier(table)),
        (family,),
    ).fetchall()
    return hashlib.sha256(repr(rows).encode()).hexdigest()
