# ruff: noqa: F811  (the fixtures imported below are arguments of the tests)
"""The SECURITY DEFINER functions and the full-text statistics, as the roles a deployment uses (LOGIN members
of ragstore_reader, ragstore_app and ragstore_owner, never a superuser): the reader writes nothing, the app
changes the statistics only through its own chunk writes, a family's statistics go with it, a family drop
is one bulk delete per table, and the search functions refuse a NULL query."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from ragstore import families
from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.run import write_records
from tests.toolkit.definer_audit import TAMPERING, app_dsn, fails, owner_dsn, reader_dsn, stats  # noqa: F401  (fixtures)

TEXTS = {f"c{i}": f"cp copies files number {i} to a destination" for i in range(30)} | {
    f"d{i}": f"tar stores archives of directories, archive {i}" for i in range(10)
}
# The SECURITY DEFINER functions the app may call (a bulk load's index work); no other role but the owner
# may call any SECURITY DEFINER function.
APP_DEFINER_FUNCTIONS = {
    "ragstore.family_bulk_drop_hnsw(text)",
    "ragstore.family_bulk_cluster(text)",
    "ragstore.family_build_hnsw(text)",
}


def create(owner_dsn: str, name: str) -> None:
    with connect(owner_dsn) as conn:
        families.create_family(conn, name, OfflineBackend())


def index(app_dsn: str, name: str, texts: dict[str, str]) -> None:
    """The app writes ``texts`` into family ``name`` the way ``ragstore index`` does."""
    with connect(app_dsn) as conn:
        fam = families.get_family(conn, name)
        records = [(f"t:{c}", ChunkRecord(chunk_id=c, package_path=f"pkg/{c}", text=t)) for c, t in texts.items()]
        write_records(conn, fam, OfflineBackend(), records)
        conn.commit()


def truth(target: str, name: str) -> dict[str, Any]:
    """The same numbers recomputed from the family's chunks' tsvectors."""
    with psycopg.connect(target) as conn:
        df = dict(
            conn.execute(
                "SELECT u.lexeme, count(*) FROM ragstore.chunks AS c CROSS JOIN LATERAL unnest(c.tsv) AS u"
                " WHERE c.family = %s GROUP BY u.lexeme",
                (name,),
            ).fetchall()
        )
        postings = conn.execute(
            "SELECT count(*) FROM ragstore.chunks AS c CROSS JOIN LATERAL ragstore.tsv_terms(c.tsv) AS t"
            " WHERE c.family = %s",
            (name,),
        ).fetchone()
        ledger = conn.execute(
            "SELECT count(*), coalesce(sum(t.tf), 0) FROM ragstore.chunks AS c"
            " CROSS JOIN LATERAL ragstore.tsv_terms(c.tsv) AS t WHERE c.family = %s AND t.lexeme = ''",
            (name,),
        ).fetchone()
    return {"df": df, "postings": postings, "ledger": ledger}


@pytest.mark.parametrize("statement", TAMPERING)
@pytest.mark.parametrize("role", ["reader", "app"])
def test_neither_the_reader_nor_the_app_can_change_the_full_text_statistics(
    request: pytest.FixtureRequest, owner_dsn: str, app_dsn: str, role: str, statement: str
) -> None:
    create(owner_dsn, "docs")
    index(app_dsn, "docs", TEXTS)
    before = stats(owner_dsn, "docs")
    assert before == truth(owner_dsn, "docs") and before["df"]["copi"] == 30
    target = app_dsn if role == "app" else request.getfixturevalue("reader_dsn")
    assert fails(target, statement)
    assert stats(owner_dsn, "docs") == before


def test_the_app_still_changes_the_statistics_by_its_own_writes(owner_dsn: str, app_dsn: str) -> None:
    create(owner_dsn, "docs")
    index(app_dsn, "docs", TEXTS)
    with psycopg.connect(app_dsn) as conn:
        conn.execute("DELETE FROM ragstore.chunks WHERE family = 'docs' AND chunk_id LIKE 'd%%'")
        conn.execute(
            "UPDATE ragstore.chunks SET text = 'ssh logs into a host' WHERE family = 'docs' AND chunk_id = 'c0'"
        )
        conn.commit()
    after = stats(owner_dsn, "docs")
    assert after == truth(owner_dsn, "docs")
    assert after["df"]["copi"] == 29 and "archiv" not in after["df"] and after["ledger"][0] == 30


def test_every_security_definer_function_is_callable_by_the_owner_side_alone_with_a_pinned_search_path(
    dsn: str,
) -> None:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT p.oid::regprocedure::text, p.proconfig, pg_get_userbyid(p.proowner),"
            " has_function_privilege('ragstore_reader', p.oid, 'EXECUTE'),"
            " has_function_privilege('ragstore_app', p.oid, 'EXECUTE'),"
            " coalesce(p.proacl::text[] && ARRAY(SELECT a::text FROM unnest(p.proacl) AS a"
            "                                     WHERE a::text LIKE '=%%'), false)"
            " FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace"
            " WHERE n.nspname = 'ragstore' AND p.prosecdef ORDER BY 1"
        ).fetchall()
    assert len(rows) >= 8
    for signature, config, owner, reader, app, public in rows:
        paths = [c for c in config or [] if c.startswith("search_path=")]
        assert len(paths) == 1 and paths[0].startswith("search_path=pg_catalog"), signature
        assert paths[0].replace(" ", "").endswith(",pg_temp"), signature
        assert owner == "ragstore_owner", signature
        assert not reader and not public, signature
        assert app == (signature in APP_DEFINER_FUNCTIONS), signature


def test_a_family_recreated_under_a_dropped_name_inherits_no_counts(owner_dsn: str, app_dsn: str) -> None:
    create(owner_dsn, "docs")
    index(app_dsn, "docs", TEXTS)
    create(owner_dsn, "other")
    index(app_dsn, "other", TEXTS)
    other = stats(owner_dsn, "other")
    # Counts set by hand (only the owner still can), under the family's name and under a name no family holds.
    with connect(owner_dsn) as conn:
        conn.execute("UPDATE ragstore.chunk_term_df SET df = 1000030 WHERE family = 'docs' AND lexeme = 'copi'")
        conn.execute("INSERT INTO ragstore.chunk_term_df (family, lexeme, df) VALUES ('docs', 'ghost', 7)")
        conn.execute("INSERT INTO ragstore.family_chunk_deltas (family, delta, tokens) VALUES ('docs', 5, 50)")
        conn.execute("INSERT INTO ragstore.chunk_term_df (family, lexeme, df) VALUES ('fresh', 'copi', 1000030)")
        conn.execute("INSERT INTO ragstore.family_chunk_deltas (family, delta, tokens) VALUES ('fresh', 9, 90)")
        conn.commit()
        families.drop_family(conn, "docs")
    assert stats(owner_dsn, "docs") == {"df": {}, "postings": (0,), "ledger": (0, 0)}
    create(owner_dsn, "docs")
    create(owner_dsn, "fresh")
    for name in ("docs", "fresh"):
        index(app_dsn, name, dict(list(TEXTS.items())[:5]))
        assert stats(owner_dsn, name) == truth(owner_dsn, name)
        assert stats(owner_dsn, name)["df"]["copi"] == 5
    assert stats(owner_dsn, "other") == other


def test_a_family_drop_deletes_its_statistics_in_bulk_not_chunk_by_chunk(owner_dsn: str, app_dsn: str) -> None:
    create(owner_dsn, "docs")
    index(app_dsn, "docs", TEXTS)
    create(owner_dsn, "other")
    index(app_dsn, "other", TEXTS)
    other = stats(owner_dsn, "other")
    postings = stats(owner_dsn, "docs")["postings"][0]
    with connect(owner_dsn) as conn:
        conn.execute("SELECT 1")  # a transaction open, so drop_family's block is a savepoint of it
        families.drop_family(conn, "docs")
        # Still in the drop's transaction: what it did to the tables.
        counts = conn.execute(
            "SELECT pg_stat_get_xact_tuples_updated('ragstore.chunk_term_df'::regclass),"
            " pg_stat_get_xact_tuples_inserted('ragstore.chunk_term_df'::regclass),"
            " pg_stat_get_xact_tuples_inserted('ragstore.family_chunk_deltas'::regclass),"
            " pg_stat_get_xact_tuples_deleted('ragstore.chunk_terms'::regclass)"
        ).fetchone()
        conn.commit()
    # No count was lowered word by word and no ledger row written: the rows went whole, by family.
    assert counts is not None
    assert counts[:3] == (0, 0, 0)
    assert counts[3] == postings > 0
    assert stats(owner_dsn, "docs") == {"df": {}, "postings": (0,), "ledger": (0, 0)}
    assert stats(owner_dsn, "other") == other == truth(owner_dsn, "other")


@pytest.mark.parametrize(
    "call",
    [
        "SELECT * FROM ragstore.search('docs', NULL, 5)",
        "SELECT * FROM ragstore.search('docs', NULL::vector, 5)",
        "SELECT * FROM ragstore.hybrid_search('docs', 'copies', NULL, 5)",
        "SELECT * FROM ragstore.hybrid_search('docs', NULL, ragstore.offline_embed('copies'), 5)",
        "SELECT * FROM ragstore.fts_search('docs', NULL, 5)",
        "SELECT * FROM ragstore.fts_top('docs', NULL, 5)",
        "SELECT * FROM ragstore.search_text('docs', NULL, 5)",
        "SELECT * FROM ragstore.search_auto('docs', NULL, NULL, 5)",
    ],
)
def test_the_search_functions_refuse_a_null_query(owner_dsn: str, app_dsn: str, reader_dsn: str, call: str) -> None:
    create(owner_dsn, "docs")
    index(app_dsn, "docs", TEXTS)
    with psycopg.connect(reader_dsn) as conn, pytest.raises(psycopg.Error) as caught:
        conn.execute(call).fetchall()
    assert caught.value.sqlstate in ("22004", "22023"), caught.value
    assert "NULL" in str(caught.value) or "empty" in str(caught.value) or "give a query" in str(caught.value)


@pytest.mark.parametrize("k", ["NULL", "0", "-1", "1001", "2147483647"])
@pytest.mark.parametrize(
    "call",
    [
        "SELECT * FROM ragstore.search('docs', ragstore.offline_embed('copies'), {k})",
        "SELECT * FROM ragstore.hybrid_search('docs', 'copies', ragstore.offline_embed('copies'), {k})",
        "SELECT * FROM ragstore.fts_search('docs', 'copies', {k})",
        "SELECT * FROM ragstore.search_text('docs', 'copies', {k})",
        "SELECT * FROM ragstore.search_auto('docs', 'copies', NULL, {k})",
    ],
)
def test_the_search_functions_refuse_a_k_out_of_range(
    owner_dsn: str, app_dsn: str, reader_dsn: str, call: str, k: str
) -> None:
    create(owner_dsn, "docs")
    index(app_dsn, "docs", TEXTS)
    with psycopg.connect(reader_dsn) as conn, pytest.raises(psycopg.errors.InvalidParameterValue, match="k must be"):
        conn.execute(call.format(k=k)).fetchall()
