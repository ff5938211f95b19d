"""A family's stable SQL name, the view ``ragstore.vectors_<family>``: ``sql/examples.sql`` runs whole after a
model migration and after a drop and re-create, as the owner and as a LOGIN member of the reader role; the
view follows the swap, keeps its grants and the user's views built on it, and fits the longest family name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from ragstore import families, migrate
from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend
from ragstore.families.migrate import migrate_family
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from tests.toolkit.definer_audit import app_dsn, owner_dsn, reader_dsn
from tests.toolkit.family_migrate import HashBackend
from tests.toolkit.old_chains import chain_0005, old_downgrade, old_upgrade
from tests.toolkit.readme import sql_statements

__all__ = ["app_dsn", "chain_0005", "owner_dsn", "reader_dsn"]  # fixtures

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sql_statements((ROOT / "sql" / "examples.sql").read_text(encoding="utf-8"))


def quick_start(conn: Any) -> None:
    families.create_family(conn, "docs", OfflineBackend())
    index_sources(conn, "docs", open_sources([str(ROOT / "examples" / "sample.jsonl")]))
    conn.commit()


def run_examples(dsn: str) -> None:
    """Every statement of sql/examples.sql, in order, on a connection of ``dsn``; each SELECT answers rows."""
    empty = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in EXAMPLES:
            cur = conn.execute(statement)
            if statement.upper().startswith("SELECT") and not cur.fetchall():
                empty.append(statement.splitlines()[-1])
    assert empty == []


def table_of(conn: Any, name: str) -> str:
    return families.get_family(conn, name).table


def test_examples_lead_with_search_auto_and_use_the_view_not_a_table_name():
    assert EXAMPLES[0].startswith("SELECT") and "ragstore.search_auto(" in EXAMPLES[0]
    text = "\n".join(EXAMPLES)
    assert "ragstore.vectors_docs" in text and "emb_docs" not in text


def test_sql_examples_run_after_a_model_migration_as_owner_and_reader(dsn, conn, reader_dsn):
    quick_start(conn)
    run_examples(dsn)
    migrate_family(conn, "docs", HashBackend(dim=8))
    migrate_family(conn, "docs", OfflineBackend())  # back to offline: search_text needs it, on a third table
    assert table_of(conn, "docs") not in ("emb_docs", "") and table_of(conn, "docs").startswith("emb_docs_")
    conn.commit()
    run_examples(dsn)
    run_examples(reader_dsn)
    rows = conn.execute("SELECT count(*), min(model) FROM ragstore.vectors_docs").fetchone()
    assert rows == (300, OfflineBackend().model)


def test_sql_examples_run_after_a_drop_and_re_create(dsn, conn, reader_dsn):
    quick_start(conn)
    families.drop_family(conn, "docs")
    conn.commit()
    assert conn.execute("SELECT to_regclass('ragstore.vectors_docs')").fetchone() == (None,)
    quick_start(conn)
    run_examples(reader_dsn)


def test_the_view_follows_the_swap_keeping_grants_and_the_users_own_views(dsn, conn, app_dsn, reader_dsn):
    quick_start(conn)
    conn.execute("CREATE VIEW public.my_docs AS SELECT chunk_id, embedding FROM ragstore.vectors_docs")
    conn.commit()
    migrate_family(conn, "docs", HashBackend(dim=8))
    conn.commit()
    assert conn.execute("SELECT count(*), min(vector_dims(embedding)) FROM public.my_docs").fetchone() == (300, 8)
    assert conn.execute("SELECT min(model) FROM ragstore.vectors_docs").fetchone() == ("hash-a",)
    for role_dsn in (app_dsn, reader_dsn):
        with psycopg.connect(role_dsn) as other:
            assert other.execute("SELECT count(*) FROM ragstore.vectors_docs").fetchone() == (300,)
    with psycopg.connect(reader_dsn) as reader:
        rights = reader.execute(
            "SELECT privilege_type FROM unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE']) AS privilege_type "
            "WHERE has_table_privilege('ragstore.vectors_docs', privilege_type)"
        ).fetchall()
    assert rights == [("SELECT",)]


def test_the_view_is_owned_by_the_owner_role_when_a_member_creates_the_family(dsn, owner_dsn, reader_dsn):
    with connect(owner_dsn) as conn:
        families.create_family(conn, "notes", OfflineBackend())
        owner = conn.execute(
            "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'ragstore.vectors_notes'::regclass"
        ).fetchone()
    assert owner == ("ragstore_owner",)
    with psycopg.connect(reader_dsn) as reader:
        assert reader.execute("SELECT count(*) FROM ragstore.vectors_notes").fetchone() == (0,)


def test_the_longest_family_name_gets_its_view_within_the_identifier_limit(conn):
    name = "f" * 47 + "1"
    family = families.create_family(conn, name, OfflineBackend())
    assert len(family.view.encode()) <= 63
    conn.commit()
    migrate_family(conn, name, HashBackend(dim=8))
    found = conn.execute(
        sql.SQL("SELECT count(*), min(model) FROM ragstore.{}").format(sql.Identifier(family.view))
    ).fetchone()
    assert found == (0, None)
    assert conn.execute("SELECT to_regclass(%s)", (f"ragstore.{family.view}",)).fetchone()[0] is not None


def test_migrate_gives_a_family_made_before_the_views_its_view(chain_0005: Path, empty_dsn: str) -> None:
    """A database at revision 0001_baseline, whose families have no view, gets them from `ragstore migrate`."""
    old_upgrade(chain_0005, empty_dsn, "head")
    with connect(empty_dsn) as conn:
        quick_start(conn)
    old_downgrade(chain_0005, empty_dsn, "0001_baseline")  # 0002_family_views's downgrade drops the views
    with psycopg.connect(empty_dsn) as conn:
        assert conn.execute("SELECT to_regclass('ragstore.vectors_docs')").fetchone() == (None,)
    result = migrate.upgrade(empty_dsn)
    assert result.after == migrate.head_revision()
    run_examples(empty_dsn)
