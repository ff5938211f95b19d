"""ragstore.hybrid_search(), the SQL function of migration 0005, agrees with the library; downgrade drops it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pgvector import Vector

from ragstore import migrate
from ragstore.errors import NotFound
from ragstore.search.hybrid import hybrid_search
from tests.integration.test_hybrid import QUERY, family  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[2]


def test_sql_function_returns_what_the_library_returns(conn: Any, family: Any) -> None:  # noqa: F811
    rows = conn.execute(
        "SELECT chunk_id, score, fts_rank, vector_rank FROM ragstore.hybrid_search('docs', 'apple', %s, 10)",
        (Vector(QUERY),),
    ).fetchall()
    hits = hybrid_search(conn, family, "apple", QUERY, k=10)
    assert rows == [(h.chunk_id, h.score, h.ranks["fts"], h.ranks["vector"]) for h in hits]
    assert rows[0][0] == "a"


def test_sql_function_refuses_an_unknown_family(conn: Any, family: Any) -> None:  # noqa: F811
    from ragstore.db.connection import db_errors

    with pytest.raises(NotFound), db_errors():
        conn.execute("SELECT * FROM ragstore.hybrid_search('nope', 'apple', %s, 3)", (Vector(np.ones(16)),))


def test_downgrade_to_0004_drops_the_function_and_upgrade_restores_it(dsn: str, conn: Any) -> None:
    exists = "SELECT to_regprocedure('ragstore.hybrid_search(text, text, vector, integer)') IS NOT NULL"
    migrate.downgrade(dsn, "0004")
    assert conn.execute(exists).fetchone()[0] is False
    conn.rollback()
    migrate.upgrade(dsn)
    assert conn.execute(exists).fetchone()[0] is True
