"""Declared filter keys holding ``%`` (or braces, quotes): a declaration never changes an answer.

A declared key is written into the SQL text as a literal (its btree indexes that expression); psycopg reads
``%`` in a query text as a placeholder, so a key such as ``a%s`` must reach the server as written.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragstore import Store, families
from ragstore.cli.main import cli
from ragstore.embed.offline import OfflineBackend
from ragstore.families import filter_keys
from ragstore.ingest.run import index_records
from ragstore.search import vector as vec
from ragstore.search.api import run_vector
from ragstore.search.request import make_filter
from tests.toolkit.search import clustered

pytestmark = pytest.mark.usefixtures("each_storage")  # each test once per index storage

PERCENT_KEYS = ("a%s", "a%(x)s", "a%%b", "%", "%b", "%t", "{}", "{0}", "%(mf0_v)s")
CLI_KEYS = ("a%(x)s", "{0}")  # the command line reaches the same Store.search: two keys show the door
N = 40
MODES = ("auto", "hnsw", "exact", "hybrid")


def _records(key: str) -> list[dict[str, Any]]:
    return [
        {
            "chunk_id": f"c{i:03d}",
            "package_path": "pkg",
            "text": f"text {i}",
            "metadata": {key: ["a", "b"][i % 2], "n": i},
        }
        for i in range(N)
    ]


def _search(runner: CliRunner, dsn: str, metadata: dict[str, Any], mode: str) -> int:
    args = ["--dsn", dsn, "search", "docs", "text", "-k", str(N), "--where", json.dumps(metadata), "--json"]
    result = runner.invoke(cli, [*args, "--mode", mode])
    assert result.exit_code == 0, (metadata, mode, result.output)
    return len(json.loads(result.output)["hits"])


def _filters(key: str) -> list[dict[str, Any]]:
    return [
        {key: "a"},
        {key: {"$eq": "b"}},
        {key: {"$in": ["a", "b"]}},
        {key: {"$gt": "a"}},
        {"$or": [{key: "a"}, {"n": {"$lt": 3}}]},
    ]


def _counts(conn: Any, fam: families.Family, key: str) -> list[int]:
    q = clustered(1, seed=5)[0]
    out = []
    for metadata in _filters(key):
        flt = make_filter(None, metadata)
        out.append(len(run_vector(conn, fam, q, k=N, flt=flt, plan=vec.PLAN_EXACT_SUBSET)))
    return out


@pytest.mark.slow
def test_keys_with_percent_signs_are_declared_and_answer_as_undeclared_in_every_mode(dsn: str, conn: Any) -> None:
    families.create_family(conn, "docs", OfflineBackend())
    conn.commit()
    with Store(dsn) as store:

        def counts(key: str) -> list[int]:
            return [
                len(store.search("docs", "text", k=N, metadata=metadata, mode=mode))
                for mode in MODES
                for metadata in _filters(key)
            ]

        for key in PERCENT_KEYS:
            index_records(conn, "docs", _records(key))
            conn.commit()
            expected = counts(key)
            assert expected == [20, 20, 40, 20, 21] * len(MODES), key
            store.add_filter_key("docs", key)
            assert counts(key) == expected, key
            store.remove_filter_key("docs", key)


def test_keys_with_percent_signs_are_declared_and_answer_as_undeclared_through_the_cli(dsn: str, conn: Any) -> None:
    families.create_family(conn, "docs", OfflineBackend())
    conn.commit()
    runner = CliRunner()
    for key in CLI_KEYS:
        index_records(conn, "docs", _records(key))
        conn.commit()
        expected = [_search(runner, dsn, metadata, mode) for mode in MODES for metadata in _filters(key)[:2]]
        assert expected == [20, 20] * len(MODES), key
        added = runner.invoke(cli, ["--dsn", dsn, "family", "filter-keys", "add", "docs", key])
        assert added.exit_code == 0, added.output
        declared = [_search(runner, dsn, metadata, mode) for mode in MODES for metadata in _filters(key)[:2]]
        assert declared == expected, key
        assert runner.invoke(cli, ["--dsn", dsn, "family", "filter-keys", "remove", "docs", key]).exit_code == 0


_HOSTILE_CHARS = st.sampled_from(list("%s()b{}'\"\\x t0$;-\n:"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    key=st.one_of(st.sampled_from(PERCENT_KEYS), st.text(_HOSTILE_CHARS, min_size=1, max_size=10)).filter(
        lambda k: not k.startswith("$") and k != "n"
    )
)
@pytest.mark.slow
def test_declaring_any_key_never_changes_a_count(conn: Any, key: str) -> None:
    fam = families.get_family(conn, "docs") if _exists(conn) else families.create_family(conn, "docs", OfflineBackend())
    index_records(conn, "docs", _records(key))
    conn.commit()
    plain = replace(fam, options={})
    declared = replace(fam, options={families.FILTER_KEYS_OPTION: [filter_keys.check_key(key)]})
    assert _counts(conn, declared, key) == _counts(conn, plain, key) == [20, 20, 40, 20, 21]


def _exists(conn: Any) -> bool:
    return any(f.name == "docs" for f in families.list_families(conn))
