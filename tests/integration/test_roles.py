# ruff: noqa: F811  (the fixtures imported below are arguments of the tests)
"""Roles and least privilege: what ragstore_app and ragstore_reader can and cannot do.

Each test logs in as a fresh LOGIN role that is a member of one ragstore group role, the way a DBA sets
it up (``CREATE ROLE alice LOGIN IN ROLE ragstore_app``), and proves the boundary with real statements.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import errors as pgerrors
from psycopg.conninfo import make_conninfo

from ragstore import families, migrate
from ragstore.cli.main import cli
from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import RagstoreError
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from tests.toolkit.roles import (
    _login_role,
    app_dsn,  # noqa: F401  (fixtures)
)

GROUPS = ("ragstore_owner", "ragstore_app", "ragstore_reader")


@pytest.fixture
def reader_dsn(dsn: str) -> Iterator[str]:
    for name in _login_role(dsn, "ragstore_reader"):
        yield make_conninfo(dsn, user=name)


@pytest.fixture
def docs(dsn: str, tmp_path: Path) -> Path:
    """Family ``docs`` created by the owner side (the migrating superuser), and a chunks file."""
    with connect(dsn) as conn:
        families.create_family(conn, "docs", OfflineBackend())
    path = tmp_path / "chunks.jsonl"
    rows = [
        {"chunk_id": f"c{i}", "package_path": "pkg/a", "text": f"text {i}", "metadata": {"n": i}} for i in range(40)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def digest(dsn: str) -> str:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT c.chunk_id, c.package_path, c.text, c.metadata::text, e.embedding::text, e.model "
            "FROM ragstore.chunks c LEFT JOIN ragstore.emb_docs e USING (chunk_id) ORDER BY c.chunk_id"
        ).fetchall()
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def refused(target: str, statement: str) -> bool:
    """True when ``statement`` fails with insufficient_privilege (42501) for the user of ``target``."""
    with psycopg.connect(target, autocommit=True) as conn:
        try:
            conn.execute(statement)
        except pgerrors.InsufficientPrivilege:
            return True
    return False


def test_migrate_creates_nologin_group_roles_and_gives_the_schema_to_the_owner(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        roles = dict(conn.execute("SELECT rolname, rolcanlogin FROM pg_roles WHERE rolname = ANY(%s)", (list(GROUPS),)))
        owners = conn.execute(
            "SELECT DISTINCT pg_get_userbyid(c.relowner) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'ragstore' AND c.relkind = 'r'"
        ).fetchall()
        schema_owner = conn.execute(
            "SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'ragstore'"
        ).fetchone()
    assert roles == dict.fromkeys(GROUPS, False)
    assert schema_owner == ("ragstore_owner",)
    assert {o for (o,) in owners} <= {"ragstore_owner", "postgres"} and ("ragstore_owner",) in owners


def test_app_role_indexes_through_the_cli_like_the_owner_would(
    dsn: str, app_dsn: str, docs: Path, tmp_path: Path
) -> None:
    result = CliRunner().invoke(cli, ["--dsn", app_dsn, "index", "docs", str(docs), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["inserted"] == 40
    as_app = digest(dsn)
    # The same input indexed by the superuser into a fresh family table gives the same content.
    with connect(dsn) as conn:
        conn.execute("TRUNCATE ragstore.chunks CASCADE")
        conn.commit()
        index_sources(conn, "docs", open_sources([str(docs)]))
    assert digest(dsn) == as_app
    # Prune (DELETE) works for the app too.
    half = tmp_path / "half.jsonl"
    half.write_text("".join(docs.read_text().splitlines(keepends=True)[:20]))
    result = CliRunner().invoke(cli, ["--dsn", app_dsn, "index", "docs", str(half), "--prune", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["pruned"] == 20


@pytest.mark.parametrize(
    "statement",
    [
        "ALTER TABLE ragstore.chunks ADD COLUMN evil text",
        "ALTER TABLE ragstore.emb_docs DROP COLUMN model",
        "CREATE TABLE ragstore.evil (x int)",
        "CREATE FUNCTION ragstore.evil() RETURNS int LANGUAGE sql AS 'SELECT 1'",
        "DROP TABLE ragstore.emb_docs",
        "TRUNCATE ragstore.chunks",
        "UPDATE ragstore.alembic_version SET version_num = 'evil'",
        "CREATE INDEX evil ON ragstore.chunks (text)",
    ],
)
def test_app_role_cannot_change_the_schema(app_dsn: str, docs: Path, statement: str) -> None:
    assert refused(app_dsn, statement)


def test_app_role_cannot_create_a_family_and_says_so_in_one_line(dsn: str, app_dsn: str, docs: Path) -> None:
    with connect(app_dsn) as conn, pytest.raises(RagstoreError, match="permission denied"):
        families.create_family(conn, "evil", OfflineBackend())
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM ragstore.families WHERE name = 'evil'").fetchone() == (0,)
        assert conn.execute("SELECT to_regclass('ragstore.emb_evil')").fetchone() == (None,)
    result = CliRunner().invoke(cli, ["--dsn", app_dsn, "family", "create", "evil2", "--backend", "offline"])
    assert result.exit_code == 1 and "permission denied" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_reader_role_selects_and_executes_but_writes_nothing(dsn: str, reader_dsn: str, docs: Path) -> None:
    with connect(dsn) as conn:
        index_sources(conn, "docs", open_sources([str(docs)]))
    before = digest(dsn)
    with psycopg.connect(reader_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM ragstore.chunks").fetchone() == (40,)
        # EXECUTE on the SQL twin of the offline backend: each stored vector is its text's fingerprint.
        worst = conn.execute(
            "SELECT max(e.embedding <=> ragstore.offline_embed(c.text)) "
            "FROM ragstore.emb_docs e JOIN ragstore.chunks c USING (chunk_id)"
        ).fetchone()
        assert worst is not None and worst[0] < 1e-6
        assert conn.execute("SELECT count(*) FROM ragstore.families").fetchone() == (1,)
    for statement in (
        "INSERT INTO ragstore.chunks (chunk_id, package_path, text, content_sha256, record_sha256) "
        "VALUES ('x', 'p', 't', sha256('t'), sha256('t'))",
        "UPDATE ragstore.chunks SET text = 'owned'",
        "DELETE FROM ragstore.emb_docs",
        "DELETE FROM ragstore.families",
        "CREATE TABLE ragstore.evil (x int)",
        "ALTER TABLE ragstore.chunks ADD COLUMN evil text",
    ):
        assert refused(reader_dsn, statement), statement
    # Through the library and the CLI: a clear error, and the tables are unchanged.
    result = CliRunner().invoke(cli, ["--dsn", reader_dsn, "index", "docs", str(docs), "--prune"])
    assert result.exit_code == 1 and "permission denied" in result.output, result.output
    changed = docs.parent / "changed.jsonl"
    changed.write_text(json.dumps({"chunk_id": "new", "package_path": "pkg/a", "text": "new"}) + "\n")
    with connect(reader_dsn) as conn, pytest.raises(RagstoreError, match="permission denied"):
        index_sources(conn, "docs", open_sources([str(changed)]))
    assert digest(dsn) == before


def test_new_family_tables_get_their_grants_through_default_privileges(dsn: str, app_dsn: str, reader_dsn: str) -> None:
    with connect(dsn) as conn:
        families.create_family(conn, "later", OfflineBackend())
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT grantee, string_agg(privilege_type, ',' ORDER BY privilege_type) "
            "FROM information_schema.role_table_grants WHERE table_schema = 'ragstore' "
            "AND table_name = 'emb_later' AND grantee IN ('ragstore_app', 'ragstore_reader') GROUP BY grantee"
        ).fetchall()
    assert dict(rows) == {"ragstore_app": "DELETE,INSERT,SELECT,UPDATE", "ragstore_reader": "SELECT"}


def test_role_and_statement_timeout_options_are_both_kept(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A DSN that picks its role with ``options=-c role=...`` keeps it when RAGSTORE_STATEMENT_TIMEOUT is set."""
    monkeypatch.setenv("RAGSTORE_STATEMENT_TIMEOUT", "1500ms")
    target = make_conninfo(dsn, options="-c role=ragstore_reader")
    with connect(target) as conn:
        assert conn.execute("SELECT current_user, current_setting('statement_timeout')").fetchone() == (
            "ragstore_reader",
            "1500ms",
        )
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM ragstore.chunks")


def test_roles_survive_downgrade_which_revokes_grants_and_upgrade_restores_them(dsn: str) -> None:
    migrate.downgrade(dsn, "base")
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM pg_roles WHERE rolname = ANY(%s)", (list(GROUPS),)).fetchone() == (3,)
        grants = conn.execute(
            "SELECT count(*) FROM information_schema.role_table_grants WHERE table_schema = 'ragstore' "
            "AND grantee IN ('ragstore_app', 'ragstore_reader')"
        ).fetchone()
        assert grants == (0,)
        assert conn.execute("SELECT count(*) FROM pg_default_acl").fetchone() == (0,)
        assert conn.execute(
            "SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'ragstore'"
        ).fetchone() != ("ragstore_owner",)
    migrate.upgrade(dsn)
    migrate.upgrade(dsn)  # idempotent at head
    with psycopg.connect(dsn) as conn:
        assert conn.execute(
            "SELECT has_table_privilege('ragstore_app', 'ragstore.chunks', 'INSERT'), "
            "has_table_privilege('ragstore_reader', 'ragstore.chunks', 'INSERT'), "
            "has_schema_privilege('ragstore_app', 'ragstore', 'CREATE')"
        ).fetchone() == (True, False, False)


def test_app_role_bulk_loads_a_family_with_a_covering_filter_key(
    dsn: str, app_dsn: str, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragstore.families import filter_keys
    from ragstore.ingest import writer

    with connect(dsn) as conn:
        filter_keys.add_key(conn, "docs", "n", covering=True)  # the owner declares it
    monkeypatch.setattr(writer, "BULK_THRESHOLD", 10)  # the bulk path: clustering, then the VACUUM step
    notices: list[str] = []
    with connect(app_dsn) as conn:
        conn.add_notice_handler(lambda diag: notices.append(str(diag.message_primary)))
        report = index_sources(conn, "docs", open_sources([str(docs)]))
    assert report.inserted == 40
    # The app does not own the table: the VACUUM is skipped, not attempted ("permission denied to vacuum").
    assert not [n for n in notices if "permission denied" in n], notices


def test_app_and_reader_search_by_text_and_the_app_writes_one_family_without_touching_the_other(
    dsn: str, app_dsn: str, reader_dsn: str, docs: Path, tmp_path: Path
) -> None:
    """Full text and hybrid read the postings and the words' counts (ragstore.chunk_term_df), written by
    the chunk triggers: both roles search, and the app's writes to one family move only that family's."""
    from ragstore.caches import caches_for
    from ragstore.search.api import search
    from ragstore.search.hybrid import hybrid_search_if_current, resolve_settings
    from ragstore.search.request import make_filter

    with connect(dsn) as conn:
        families.create_family(conn, "other", OfflineBackend())
    other = tmp_path / "other.jsonl"
    other.write_text(
        "".join(
            json.dumps({"chunk_id": f"o{i}", "package_path": "pkg/o", "text": f"text orange {i}"}) + "\n"
            for i in range(5)
        )
    )

    def counts(family: str) -> dict[str, int]:
        with psycopg.connect(dsn) as conn:
            rows = conn.execute("SELECT lexeme, df FROM ragstore.chunk_term_df WHERE family = %s", [family]).fetchall()
        return dict(rows)

    with connect(app_dsn) as conn:
        assert index_sources(conn, "docs", open_sources([str(docs)])).inserted == 40
        assert index_sources(conn, "other", open_sources([str(other)])).inserted == 5
    assert counts("docs")["text"] == 40 and counts("other") == {"text": 5, "orang": 5, **{str(i): 1 for i in range(5)}}
    before_other = counts("other")
    changed = tmp_path / "changed.jsonl"
    changed.write_text(json.dumps({"chunk_id": "c7", "package_path": "pkg/a", "text": "renamed seven"}) + "\n")
    with connect(app_dsn) as conn:
        report = index_sources(conn, "docs", open_sources([str(changed)]), prune=True)
    assert report.pruned == 39
    assert counts("docs") == {"renam": 1, "seven": 1} and counts("other") == before_other
    for role_dsn in (app_dsn, reader_dsn):
        with connect(role_dsn, autocommit=True) as conn:
            for mode in ("fts", "hybrid"):
                hits = search(conn, "other", "orange text", k=3, mode=mode)
                assert len(hits) == 3 and all(h.chunk_id.startswith("o") for h in hits), (role_dsn, mode)
            # The family is remembered now: hybrid reads its row in the statement's round trip, as this role too.
            assert caches_for(conn).family("other") is not None
            again = search(conn, "other", "orange text", k=3, mode="hybrid")
            assert again == hits and all(h.vector is None for h in again), role_dsn
            fam = caches_for(conn).family("other")
            assert fam is not None
            served = hybrid_search_if_current(
                conn, fam, "orange text", OfflineBackend().embed(["orange text"])[0],
                settings=resolve_settings(fam), flt=make_filter(None, None), k=3,
            )  # fmt: skip
            assert served == hits, role_dsn  # None would mean the role could not read the family's row
            assert [h.chunk_id for h in search(conn, "docs", "seven", k=3, mode="fts")] == ["c7"]
