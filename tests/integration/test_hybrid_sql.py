"""The SQL entry points (ragstore.hybrid_search, ragstore.search_auto) agree with the library; the family chunk
count the IDF reads follows every write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pgvector import Vector

from ragstore import families
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import NotFound
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.run import write_records
from ragstore.search.api import search
from ragstore.search.hybrid import hybrid_search
from tests.toolkit.hybrid import QUERY, family  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("each_storage")  # each test once per index storage

ROOT = Path(__file__).resolve().parents[2]


def test_sql_function_returns_what_the_library_returns(conn: Any, family: Any) -> None:  # noqa: F811
    rows = conn.execute(
        "SELECT chunk_id, score, fts_rank, vector_rank FROM ragstore.hybrid_search('docs', 'apple', %s, 10)",
        (Vector(QUERY),),
    ).fetchall()
    hits = hybrid_search(conn, family, "apple", QUERY, k=10)
    assert [r[0] for r in rows] == [h.chunk_id for h in hits]
    assert [r[1] for r in rows] == pytest.approx([h.score for h in hits], abs=1e-9)
    assert [r[2:] for r in rows] == [(h.ranks["fts"], h.ranks["vector"]) for h in hits]


def test_sql_function_refuses_an_unknown_family(conn: Any, family: Any) -> None:  # noqa: F811
    from ragstore.db.connection import db_errors

    with pytest.raises(NotFound), db_errors():
        conn.execute("SELECT * FROM ragstore.hybrid_search('nope', 'apple', %s, 3)", (Vector(np.ones(16)),))


def test_sql_function_fuses_by_the_family_stored_settings(conn: Any, family: Any) -> None:  # noqa: F811
    from ragstore.search.fusion import FusionSettings, store_settings

    for settings in (FusionSettings(fusion="rrf", per_leg=3), FusionSettings(normalization="minmax", alpha=0.4)):
        store_settings(conn, "docs", settings)
        fam = families.get_family(conn, "docs")
        rows = conn.execute(
            "SELECT chunk_id, score, fts_rank, vector_rank FROM ragstore.hybrid_search('docs', 'apple', %s, 3)",
            (Vector(QUERY),),
        ).fetchall()
        hits = hybrid_search(conn, fam, "apple", QUERY, k=3, per_leg=max(settings.per_leg, 3))
        assert [r[0] for r in rows] == [h.chunk_id for h in hits]
        assert [r[1] for r in rows] == pytest.approx([h.score for h in hits], abs=1e-9)


def test_search_auto_runs_the_default_mode_of_the_cli(conn: Any, family: Any) -> None:  # noqa: F811
    # An offline family: `ragstore search` runs full text, and so does the SQL entry point.
    rows = conn.execute("SELECT chunk_id, score FROM ragstore.search_auto('docs', 'apple', NULL, 10)").fetchall()
    hits = search(conn, "docs", "apple", k=10)
    assert [r[0] for r in rows] == [h.chunk_id for h in hits] == ["a", "b"]
    assert [r[1] for r in rows] == pytest.approx([h.score for h in hits])
    by_vector = conn.execute("SELECT chunk_id FROM ragstore.search_auto('docs', NULL, %s, 2)", (Vector(QUERY),))
    assert [r[0] for r in by_vector.fetchall()] == [h.chunk_id for h in search(conn, "docs", vector=QUERY, k=2)]


def test_search_auto_on_a_semantic_family_needs_the_query_vector(conn: Any, family: Any) -> None:  # noqa: F811
    from ragstore.db.connection import db_errors
    from ragstore.errors import RagstoreError

    conn.execute("UPDATE ragstore.families SET backend = 'minilm' WHERE name = 'docs'")
    with pytest.raises(RagstoreError, match="embed the query"), db_errors():
        conn.execute("SELECT * FROM ragstore.search_auto('docs', 'apple', NULL, 3)")
    conn.rollback()


def test_the_family_chunk_count_follows_writes_deletes_and_drop(conn: Any, family: Any) -> None:  # noqa: F811
    def counted(name: str) -> tuple[int, int]:
        kept = conn.execute(
            "SELECT coalesce(sum(delta), 0) FROM ragstore.family_chunk_deltas WHERE family = %s", (name,)
        ).fetchone()[0]
        real = conn.execute("SELECT count(*) FROM ragstore.chunks WHERE family = %s", (name,)).fetchone()[0]
        return int(kept), int(real)

    assert counted("docs") == (4, 4)
    other = families.create_family(conn, "other", OfflineBackend())
    write_records(conn, other, OfflineBackend(), [("t:0", ChunkRecord(chunk_id="z", package_path="p", text="apple"))])
    assert counted("docs") == (4, 4) and counted("other") == (1, 1)
    conn.execute("DELETE FROM ragstore.chunks WHERE family = 'docs' AND chunk_id = 'd'")
    assert counted("docs") == (3, 3)
    families.drop_family(conn, "other")
    assert counted("other") == (0, 0) and counted("docs") == (3, 3)


def _function_defaults(conn: Any) -> dict[str, Any]:
    import json
    import re

    source = conn.execute(
        "SELECT prosrc FROM pg_proc WHERE oid = 'ragstore.hybrid_search(text, text, vector, integer)'::regprocedure"
    ).fetchone()[0]
    found = re.search(r"fusion := '(\{[^']*\})'::jsonb", source)
    assert found is not None
    return dict(json.loads(found.group(1)))


def test_sql_function_defaults_are_the_librarys(conn: Any) -> None:
    from ragstore.search.fusion import DEFAULT_FUSION

    assert _function_defaults(conn) == DEFAULT_FUSION.as_dict()


def test_sql_function_with_a_zero_vector_has_an_empty_vector_leg_as_the_library(conn: Any, family: Any) -> None:  # noqa: F811
    zero = np.zeros(QUERY.shape[0], dtype=np.float32)
    rows = conn.execute(
        "SELECT chunk_id, score, fts_rank, vector_rank FROM ragstore.hybrid_search('docs', 'apple', %s, 10)",
        (Vector(zero),),
    ).fetchall()
    hits = hybrid_search(conn, family, "apple", zero, k=10)
    assert [r[0] for r in rows] == [h.chunk_id for h in hits] and rows
    assert [r[1] for r in rows] == pytest.approx([h.score for h in hits], abs=1e-9)
    assert [r[2:] for r in rows] == [(h.ranks["fts"], h.ranks["vector"]) for h in hits]
    assert all(r[3] is None for r in rows)
