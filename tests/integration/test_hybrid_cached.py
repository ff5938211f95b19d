"""A hybrid search by text on a remembered family checks the family's row in the search statement itself,
not in a statement of its own before it; a changed row or a swapped table sends the search to the fresh path."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from ragstore.caches import caches_for
from ragstore.db.connection import connect
from ragstore.search import plan
from ragstore.search.api import search
from ragstore.search.fusion import FusionSettings, store_settings
from ragstore.search.hybrid import hybrid_search, hybrid_search_if_current, resolve_settings
from ragstore.search.request import make_filter
from tests.toolkit.hybrid import family  # noqa: F401  (fixture)

pytestmark = pytest.mark.usefixtures("each_storage")  # each test once per index storage


def _ids_scores(hits: list[Any]) -> list[tuple[str, float]]:
    return [(h.chunk_id, h.score) for h in hits]


def test_a_remembered_family_is_searched_without_a_lookup_first(conn: Any, family: Any, monkeypatch: Any) -> None:  # noqa: F811
    conn.autocommit = True
    first = search(conn, "docs", "apple", k=3, mode="hybrid")  # reads the family, remembers it
    assert first

    def no_lookup(name: str, memo: Any) -> Any:
        raise AssertionError("the family was looked up before the search")
        yield  # a plan step generator

    monkeypatch.setattr(plan, "read_family", no_lookup)
    assert _ids_scores(search(conn, "docs", "apple", k=3, mode="hybrid")) == _ids_scores(first)


def test_a_family_row_changed_elsewhere_is_noticed_by_the_same_round_trip(dsn: str, conn: Any, family: Any) -> None:  # noqa: F811
    conn.autocommit = True
    cc = search(conn, "docs", "apple", k=4, mode="hybrid")
    with connect(dsn) as other:  # another session stores other fusion settings for the family
        store_settings(other, "docs", FusionSettings(fusion="rrf"))
    rrf = search(conn, "docs", "apple", k=4, mode="hybrid")
    remembered = caches_for(conn).family("docs")
    assert remembered is not None and remembered.options["fusion"]["fusion"] == "rrf"
    caches_for(conn).clear()
    assert _ids_scores(rrf) == _ids_scores(search(conn, "docs", "apple", k=4, mode="hybrid"))
    assert _ids_scores(rrf) != _ids_scores(cc)


@pytest.mark.parametrize("autocommit", [True, False])
def test_a_swapped_table_under_a_remembered_family_falls_back_and_answers(
    conn: Any,
    family: Any,  # noqa: F811
    autocommit: bool,
) -> None:
    conn.autocommit = autocommit
    expected = _ids_scores(search(conn, "docs", "apple", k=3, mode="hybrid"))
    stale = caches_for(conn).family("docs")
    conn.execute(f"ALTER TABLE ragstore.{family.table} RENAME TO emb_docs_v2")
    conn.execute("UPDATE ragstore.families SET table_name = 'emb_docs_v2' WHERE name = 'docs'")
    assert caches_for(conn).family("docs") is stale
    assert _ids_scores(search(conn, "docs", "apple", k=3, mode="hybrid")) == expected
    assert caches_for(conn).family("docs").table == "emb_docs_v2"
    if not autocommit:
        assert conn.info.transaction_status.name == "INTRANS"  # the caller's transaction is intact


@pytest.mark.parametrize(
    "change",
    [
        {"backend": "openai"},
        {"model": "another-model"},
        {"state": "migrating"},
        {"vector_type": "halfvec"},
        {"options": {"fusion": {"fusion": "rrf"}}},
        {"name": "nobody"},
    ],
)
def test_the_search_statement_answers_only_for_the_family_row_as_it_is(
    conn: Any,
    family: Any,  # noqa: F811
    change: dict[str, Any],
    monkeypatch: Any,
) -> None:
    conn.autocommit = True
    vector = np.ones(family.dim, dtype=np.float32)
    flt = make_filter(None, None)
    settings = resolve_settings(family)
    expected = hybrid_search(conn, family, "apple", vector, k=3, settings=settings, vectors=False)
    assert expected

    def no_pipeline() -> Any:
        raise AssertionError("the remembered-family search sent more than its one statement")

    monkeypatch.setattr(conn, "pipeline", no_pipeline)
    same = hybrid_search_if_current(conn, family, "apple", vector, settings=settings, flt=flt, k=3)
    assert same == expected
    other = replace(family, **change)
    assert hybrid_search_if_current(conn, other, "apple", vector, settings=settings, flt=flt, k=3) is None
