"""The database in one place: ``ragstore/sql/schema.sql`` and ``ragstore/sql/functions/`` are what
``ragstore migrate`` builds, what it upgrades a database of either replaced chain (0020-0022, 0001_baseline-
0005_sync_status) to, data kept, and what a later revision must keep them equal to. The catalog compared is
tests/catalog.py's; the old chains are tests/toolkit/old_chains.py's."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from ragstore import families, migrate
from ragstore.cli.main import cli
from ragstore.db import schema
from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import SchemaError
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from tests.catalog import catalog, differences
from tests.fix_db import _drop_database, _fresh_database, with_database
from tests.toolkit.old_chains import chain_0005, chain_0022, old_downgrade, old_upgrade

__all__ = ["chain_0005", "chain_0022"]  # fixtures


@pytest.fixture
def schema_dsn(pg_admin_dsn: str) -> Iterator[str]:
    """A database built directly from schema.sql and the function files, without Alembic."""
    name = _fresh_database(pg_admin_dsn, None)
    target = with_database(pg_admin_dsn, name)
    with psycopg.connect(target) as conn:
        conn.execute("CREATE SCHEMA ragstore")
        for statement in schema.build_statements(migrate.head_revision()):
            conn.execute(statement)
    yield target
    _drop_database(pg_admin_dsn, name)


def seed(dsn: str, tmp_path: Path) -> None:
    """Two families with chunks (postings, counts, ledger), memory with a binding, as a user would have them."""
    path = tmp_path / "chunks.jsonl"
    path.write_text(
        "".join(
            f'{{"chunk_id": "c{i}", "package_path": "pkg/{i % 3}", "text": "cp copies file {i} to a place", '
            f'"metadata": {{"n": {i}}}}}\n'
            for i in range(25)
        )
    )
    with connect(dsn) as conn:
        for name in ("docs", "notes"):
            families.create_family(conn, name, OfflineBackend())
            index_sources(conn, name, open_sources([str(path)]))
        conn.execute("DELETE FROM ragstore.chunks WHERE family = 'notes' AND chunk_id IN ('c1', 'c2')")
        conn.execute("INSERT INTO ragstore.agent_principals (agent, role_name) VALUES ('ana', 'ragstore_app')")
        conn.execute(
            "INSERT INTO ragstore.memory (agent, id, store, at, content) "
            "VALUES ('ana', 'm1', 'episodic', '2026-12-01T10:00:00Z', 'met bob')"
        )
        conn.commit()


DATA = {
    "chunks": "SELECT family, chunk_id, package_path, text, metadata::text, record_sha256 FROM ragstore.chunks",
    "docs": "SELECT chunk_id, embedding::text, metadata::text FROM ragstore.emb_docs",
    "notes": "SELECT chunk_id, embedding::text FROM ragstore.emb_notes",
    "postings": "SELECT family, lexeme, chunk_id, tf, dl FROM ragstore.chunk_terms",
    "df": "SELECT family, lexeme, df FROM ragstore.chunk_term_df",
    "ledger": "SELECT family, sum(delta), sum(tokens) FROM ragstore.family_chunk_deltas GROUP BY family",
    "memory": "SELECT agent, id, store, at, content FROM ragstore.memory",
    "bindings": "SELECT agent, role_name FROM ragstore.agent_principals",
    "bm25": "SELECT chunk_id, score FROM ragstore.fts_search('docs', 'copies file 7', 5)",
}


def data(dsn: str) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(dsn) as conn:
        return {part: sorted(conn.execute(text).fetchall()) for part, text in DATA.items()}


def test_a_migrated_empty_database_is_the_one_schema_sql_builds(empty_dsn: str, schema_dsn: str) -> None:
    result = migrate.upgrade(empty_dsn)
    assert result.before is None and result.after == migrate.head_revision()
    assert differences(catalog(empty_dsn), catalog(schema_dsn)) == []


def test_migrate_twice_changes_nothing_and_applies_no_file_again(empty_dsn: str) -> None:
    migrate.upgrade(empty_dsn)
    before = catalog(empty_dsn)
    with psycopg.connect(empty_dsn) as conn:
        applied = conn.execute("SELECT name, sha256, applied_at FROM ragstore.applied_files ORDER BY 1").fetchall()
    assert {row[0] for row in applied} == {f.name for f in schema.replaceables()}
    second = migrate.upgrade(empty_dsn)
    assert not second.changed and second.applied == () and second.replaced == ()
    with psycopg.connect(empty_dsn) as conn:
        assert (
            conn.execute("SELECT name, sha256, applied_at FROM ragstore.applied_files ORDER BY 1").fetchall() == applied
        )
    assert differences(catalog(empty_dsn), before) == []


def test_a_changed_or_new_function_file_is_applied_with_the_owner_and_grants_of_the_others(
    empty_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not the cloned `dsn`: CREATE DATABASE ... TEMPLATE does not copy the database's grants, which section
    # grants would then add.
    dsn = empty_dsn
    migrate.upgrade(dsn)
    before = catalog(dsn)
    folder = tmp_path / "functions"
    shutil.copytree(schema.FUNCTIONS_DIR, folder)
    tsv_terms = folder / "tsv_terms.sql"
    tsv_terms.write_text(tsv_terms.read_text().replace("plus its length row", "and its length row"))
    (folder / "zz_answer.sql").write_text("CREATE OR REPLACE FUNCTION ragstore.zz_answer() RETURNS integer\n"
                                          "LANGUAGE sql IMMUTABLE AS $fn$ SELECT 42 $fn$;\n")  # fmt: skip
    monkeypatch.setattr(schema, "FUNCTIONS_DIR", folder)
    result = migrate.upgrade(dsn)
    assert result.applied == () and result.replaced == ("tsv_terms.sql", "zz_answer.sql", schema.GRANTS)
    after = catalog(dsn)
    assert {part for part in before if before[part] != after[part]} == {"functions"}
    assert {row[0] for row in set(before["functions"]) ^ set(after["functions"])} == {"tsv_terms", "zz_answer"}
    with psycopg.connect(dsn) as conn:
        assert conn.execute(
            "SELECT pg_get_userbyid(proowner), has_function_privilege('ragstore_reader', oid, 'EXECUTE'), "
            "obj_description('ragstore.tsv_terms(tsvector)'::regprocedure, 'pg_proc') LIKE '%and its length row%' "
            "FROM pg_proc WHERE proname = 'zz_answer'"
        ).fetchone() == ("ragstore_owner", True, True)
    assert not migrate.upgrade(dsn).changed


@pytest.mark.slow
@pytest.mark.parametrize("old", ["0020", "0021", "0022"])
def test_a_database_of_the_old_chain_upgrades_in_place_with_its_data(
    old: str, chain_0022: Path, empty_dsn: str, schema_dsn: str, tmp_path: Path
) -> None:
    old_upgrade(chain_0022, empty_dsn, old)
    seed(empty_dsn, tmp_path)
    kept = data(empty_dsn)
    assert kept["postings"] and kept["df"] and kept["memory"] and len(kept["bm25"]) == 5
    result = migrate.upgrade(empty_dsn)
    assert (result.before, result.after, result.applied[0]) == (old, migrate.head_revision(), "0006_baseline")
    assert data(empty_dsn) == kept
    with connect(schema_dsn) as conn:  # the same family tables, made at head
        for name in ("docs", "notes"):
            families.create_family(conn, name, OfflineBackend())
    assert differences(catalog(empty_dsn), catalog(schema_dsn)) == []
    assert not migrate.upgrade(empty_dsn).changed


SQUASHED = ["0001_baseline", "0002_family_views", "0003_sync", "0004_api_tokens", "0005_sync_status"]


@pytest.mark.parametrize(
    "old", [pytest.param(rev, marks=() if rev == SQUASHED[-1] else pytest.mark.slow) for rev in SQUASHED]
)
def test_a_database_of_the_squashed_chain_upgrades_in_place_with_its_data(
    old: str, chain_0005: Path, empty_dsn: str, schema_dsn: str, tmp_path: Path
) -> None:
    # Built as that ragstore built it: to its head, seeded, then down to `old` by its revisions' downgrades.
    old_upgrade(chain_0005, empty_dsn, "head")
    seed(empty_dsn, tmp_path)
    if old != SQUASHED[-1]:
        old_downgrade(chain_0005, empty_dsn, old)
    assert migrate.current_revision(empty_dsn) == old
    kept = data(empty_dsn)
    assert kept["postings"] and kept["df"] and kept["memory"] and len(kept["bm25"]) == 5
    with psycopg.connect(empty_dsn) as conn:
        recorded = {str(n): bytes(s) for n, s in conn.execute("SELECT name, sha256 FROM ragstore.applied_files")}
    result = migrate.upgrade(empty_dsn)
    assert (result.before, result.after, result.applied) == (old, migrate.head_revision(), ("0006_baseline",))
    # At the old head the revision only re-stamps: then the files whose text changed since are re-applied,
    # as at any migrate. Below it, the revision applies every file itself.
    changed = tuple(item.name for item in schema.pending(recorded)) if old == SQUASHED[-1] else ()
    assert result.replaced == changed
    assert data(empty_dsn) == kept
    with connect(schema_dsn) as conn:
        for name in ("docs", "notes"):
            families.create_family(conn, name, OfflineBackend())
    assert differences(catalog(empty_dsn), catalog(schema_dsn)) == []
    assert not migrate.upgrade(empty_dsn).changed


def test_the_baseline_downgrades_to_an_empty_schema_even_with_a_followed_table(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        families.create_family(conn, "docs", OfflineBackend())
        conn.execute("CREATE TABLE public.notes (id int PRIMARY KEY, body text)")
        conn.execute(
            "CREATE TRIGGER notes_sync AFTER INSERT ON public.notes FOR EACH ROW "
            "EXECUTE FUNCTION ragstore.sync_enqueue()"
        )
        conn.commit()
    migrate.downgrade(dsn)
    with psycopg.connect(dsn) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'ragstore' AND c.relname <> 'alembic_version' AND c.relkind IN ('r', 'v', 'S')"
        ).fetchone()
        assert left == (0,)
        assert conn.execute("SELECT count(*) FROM pg_trigger WHERE tgname = 'notes_sync'").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM public.notes").fetchone() == (0,)  # the user's table stays
    assert migrate.upgrade(dsn).after == migrate.head_revision()


def test_a_database_older_than_the_bridge_is_refused_in_one_line_and_left_as_it_was(
    chain_0022: Path, empty_dsn: str
) -> None:
    old_upgrade(chain_0022, empty_dsn, "0018")
    before = catalog(empty_dsn)
    with pytest.raises(SchemaError, match=r"revision 0018, older than 0020.*CHANGELOG\.md"):
        migrate.upgrade(empty_dsn)
    assert migrate.current_revision(empty_dsn) == "0018"
    assert differences(catalog(empty_dsn), before) == []


def test_the_cli_says_which_files_a_migrate_at_head_re_applied(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute("DELETE FROM ragstore.applied_files WHERE name = 'search.sql'")
    result = CliRunner().invoke(cli, ["--dsn", dsn, "migrate"], catch_exceptions=False)
    assert result.output == f"at head ({migrate.head_revision()}): re-applied search.sql, schema.sql:grants\n"
    result = CliRunner().invoke(cli, ["--dsn", dsn, "migrate", "--json"], catch_exceptions=False)
    assert '"replaced":[]' in result.output.replace(" ", "") and "nothing" not in result.output
