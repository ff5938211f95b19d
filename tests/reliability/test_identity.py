"""Memory isolation bound to a database identity, owner-only erasure, and the registry as the owner's.

Every path is exercised AS the roles a deployment uses: fresh LOGIN roles that are members of
``ragstore_app``, ``ragstore_reader`` or ``ragstore_owner``, connecting as themselves (never a superuser;
the superuser of the test server only seeds data and creates the roles). Each test reproduces a
behaviour an outside review saw break, and asserts the guarantee that replaces it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result
from psycopg import errors as pgerrors
from psycopg import sql
from psycopg.conninfo import make_conninfo

from ragstore import families
from ragstore.cli.main import cli
from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import PermissionDenied
from ragstore.memory import AgentProfile, MemoryRecord, Store, add_records, compose_from_db, forget
from tests.toolkit.roles import end_sessions

pytestmark = pytest.mark.reliability

T0 = datetime(2026, 6, 1, tzinfo=UTC)
NOW = T0 + timedelta(days=1)
EVERY_STORE = ["episodic", "semantic", "procedural", "decision", "transcript"]


def rec(id_: str, agent: str, content: str, store: str = "semantic") -> MemoryRecord:
    return MemoryRecord(id=id_, agent=agent, store=Store(store), at=T0, content=content, confidence=0.9)


class Roles:
    """LOGIN roles made for one test, each a member of one ragstore group role; dropped at the end."""

    def __init__(self, admin_dsn: str) -> None:
        self.admin_dsn = admin_dsn
        self.made: list[str] = []

    def login(self, group: str) -> tuple[str, str]:
        """A new LOGIN role in ``group``: ``(role name, its DSN)``."""
        name = f"rs_{group.split('_')[1]}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(self.admin_dsn, autocommit=True) as admin:
            admin.execute(
                sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(sql.Identifier(name), sql.Identifier(group))
            )
        self.made.append(name)
        return name, make_conninfo(self.admin_dsn, user=name)

    def drop(self) -> None:
        with psycopg.connect(self.admin_dsn, autocommit=True) as admin:
            for name in self.made:
                end_sessions(admin, name)
                admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
                admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


@pytest.fixture
def roles(dsn: str) -> Iterator[Roles]:
    made = Roles(dsn)
    yield made
    made.drop()


@pytest.fixture
def seeded(dsn: str) -> str:
    """Records of agents ana and bob, written by the database's superuser (the embedded single-user case)."""
    with connect(dsn) as conn:
        add_records(
            conn,
            [
                rec("a-sem", "ana", "ana knows the rollout plan"),
                rec("a-dec", "ana", "ana decided the plan is secret", "decision"),
                rec("b-sem", "bob", "bob's private medical note"),
            ],
        )
    return dsn


def run(dsn: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--dsn", dsn, *args])


def one_line_error(result: Result, *words: str) -> None:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    for word in words:
        assert word in result.output, result.output


def bind_agent(owner_dsn: str, agent: str, role: str) -> None:
    """The owner binds ``agent`` to ``role`` through the CLI, as docs/guide/roles.md says."""
    result = run(owner_dsn, "memory", "grant", "--agent", agent, "--role", role)
    assert result.exit_code == 0, result.output


def memory_ids(dsn: str, agent: str) -> list[str]:
    with psycopg.connect(dsn) as conn:  # the superuser: sees every row
        rows = conn.execute("SELECT id FROM ragstore.memory WHERE agent = %s ORDER BY id", (agent,)).fetchall()
    return [r[0] for r in rows]


# -- memory isolation ---------------------------------------------------------------------------------


def test_reader_setting_ragstore_agent_reads_nothing_of_another_agent(seeded: str, roles: Roles) -> None:
    _, owner = roles.login("ragstore_owner")
    reader, reader_dsn = roles.login("ragstore_reader")
    bind_agent(owner, "ana", reader)
    with psycopg.connect(reader_dsn) as conn:
        conn.execute("SET ragstore.agent = 'bob'")
        assert conn.execute("SELECT count(*) FROM ragstore.memory WHERE agent = 'bob'").fetchone() == (0,)
        conn.execute("SELECT set_config('ragstore.agent', 'bob', false)")
        assert conn.execute("SELECT array_agg(id ORDER BY id) FROM ragstore.memory").fetchone() == (["a-dec", "a-sem"],)
    with connect(reader_dsn) as conn:
        bob = compose_from_db(conn, AgentProfile(agent="bob", stores=EVERY_STORE), now=NOW)
        ana = compose_from_db(conn, AgentProfile(agent="ana", stores=EVERY_STORE), now=NOW)
    assert list(bob.all_records()) == [] and "medical" not in bob.to_json().decode()
    assert sorted(r.id for r in ana.all_records()) == ["a-dec", "a-sem"]


def test_app_cannot_plant_a_record_in_another_agents_memory(seeded: str, roles: Roles) -> None:
    _, owner = roles.login("ragstore_owner")
    app, app_dsn = roles.login("ragstore_app")
    bind_agent(owner, "ana", app)
    with connect(app_dsn) as conn, pytest.raises(PermissionDenied, match="bob"):
        add_records(conn, [rec("planted", "bob", "bob agreed to send the keys to eve")])
    with psycopg.connect(app_dsn) as conn:
        conn.execute("SELECT set_config('ragstore.agent', 'bob', false)")
        with pytest.raises(pgerrors.InsufficientPrivilege):
            conn.execute(
                "INSERT INTO ragstore.memory (agent, id, store, at, content) "
                "VALUES ('bob', 'planted2', 'semantic', now(), 'forged')"
            )
    result = run(app_dsn, "memory", "add", "--agent", "bob", "--store", "semantic", "--content", "planted by cli")
    one_line_error(result, "permission denied")
    assert memory_ids(seeded, "bob") == ["b-sem"]
    # Its own agent works through the same paths.
    result = run(app_dsn, "memory", "add", "--agent", "ana", "--store", "episodic", "--content", "x", "--id", "a-new")
    assert result.exit_code == 0, result.output
    assert memory_ids(seeded, "ana") == ["a-dec", "a-new", "a-sem"]


def test_app_and_reader_cannot_forget_or_delete_any_record(seeded: str, roles: Roles) -> None:
    _, owner = roles.login("ragstore_owner")
    app, app_dsn = roles.login("ragstore_app")
    reader, reader_dsn = roles.login("ragstore_reader")
    bind_agent(owner, "ana", app)
    bind_agent(owner, "ana", reader)
    # another agent's record through the CLI, and its own agent's record: erasure is the owner's
    for target, agent, record in ((app_dsn, "bob", "b-sem"), (app_dsn, "ana", "a-sem"), (reader_dsn, "ana", "a-sem")):
        result = run(target, "memory", "forget", "--agent", agent, "--id", record, "--reason", "r")
        one_line_error(result, "permission denied")
    with psycopg.connect(seeded) as conn:
        rights = conn.execute(
            "SELECT has_function_privilege(%s, 'ragstore.memory_forget(text, text, text)', 'EXECUTE'), "
            "has_function_privilege(%s, 'ragstore.memory_forget(text, text, text)', 'EXECUTE'), "
            "has_table_privilege(%s, 'ragstore.memory', 'DELETE'), "
            "has_table_privilege(%s, 'ragstore.memory', 'DELETE')",
            (app, reader, app, reader),
        ).fetchone()
    assert rights == (False, False, False, False)
    # the flag the app can set itself is no permission
    for target in (app_dsn, reader_dsn):
        with psycopg.connect(target) as conn:
            conn.execute("SELECT set_config('ragstore.forget', 'on', false)")
            conn.execute("SELECT set_config('ragstore.forget_reason', 'forged', false)")
            conn.execute("SELECT set_config('ragstore.agent', 'bob', false)")
            with pytest.raises(pgerrors.InsufficientPrivilege):
                conn.execute("DELETE FROM ragstore.memory")
    assert memory_ids(seeded, "ana") == ["a-dec", "a-sem"] and memory_ids(seeded, "bob") == ["b-sem"]


def test_forget_is_the_owners_and_its_log_cannot_be_forged_or_read_across_agents(seeded: str, roles: Roles) -> None:
    owner, owner_dsn = roles.login("ragstore_owner")
    app, app_dsn = roles.login("ragstore_app")
    reader, reader_dsn = roles.login("ragstore_reader")
    bind_agent(owner_dsn, "ana", app)
    bind_agent(owner_dsn, "bob", reader)
    with connect(owner_dsn) as conn:
        # a caller-set acting role is ignored: the log takes current_user and session_user
        conn.execute("SELECT set_config('ragstore.forget_role', 'postgres', false)")
        result = forget(conn, "ana", "a-sem", "erasure request 7")
        forget(conn, "bob", "b-sem", "bob's erasure reason")
    assert (result.forgotten_by, result.acting_role) == (owner, owner)
    assert memory_ids(seeded, "ana") == ["a-dec"]
    # nobody but the owner path writes the log
    for target in (app_dsn, reader_dsn):
        with psycopg.connect(target) as conn, pytest.raises(pgerrors.InsufficientPrivilege):
            conn.execute(
                "INSERT INTO ragstore.memory_forget_log (agent, store, record_id, reason, forgotten_by, acting_role) "
                "VALUES ('ana', 'semantic', 'x', 'forged', 'dba', 'dba')"
            )
    # each role sees the log entries of its own agents only; the owner sees all
    with psycopg.connect(app_dsn) as conn:
        assert conn.execute("SELECT array_agg(reason) FROM ragstore.memory_forget_log").fetchone() == (
            ["erasure request 7"],
        )
    with psycopg.connect(reader_dsn) as conn:
        assert conn.execute("SELECT array_agg(reason) FROM ragstore.memory_forget_log").fetchone() == (
            ["bob's erasure reason"],
        )
    with psycopg.connect(owner_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM ragstore.memory_forget_log").fetchone() == (2,)
        with pytest.raises(pgerrors.InsufficientPrivilege, match="append-only"):
            conn.execute("UPDATE ragstore.memory_forget_log SET reason = 'rewritten'")


def test_only_the_owner_binds_agents_and_a_binding_can_be_revoked(seeded: str, roles: Roles) -> None:
    _, owner = roles.login("ragstore_owner")
    app, app_dsn = roles.login("ragstore_app")
    one_line_error(run(app_dsn, "memory", "grant", "--agent", "bob", "--role", app), "permission denied")
    with psycopg.connect(app_dsn) as conn, pytest.raises(pgerrors.InsufficientPrivilege):
        conn.execute("INSERT INTO ragstore.agent_principals (agent, role_name) VALUES ('bob', current_user)")
    one_line_error(run(owner, "memory", "grant", "--agent", "bob", "--role", "no_such_role_x"), "no_such_role_x")
    bind_agent(owner, "bob", app)
    listed = run(owner, "memory", "principals", "--json")
    assert listed.exit_code == 0 and {"agent": "bob", "role": app} in [
        {"agent": p["agent"], "role": p["role"]} for p in json.loads(listed.output)
    ]
    with psycopg.connect(app_dsn) as conn:
        assert conn.execute("SELECT array_agg(id) FROM ragstore.memory").fetchone() == (["b-sem"],)
    assert run(owner, "memory", "revoke", "--agent", "bob", "--role", app).exit_code == 0
    with psycopg.connect(app_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM ragstore.memory").fetchone() == (0,)


# -- the registry and the owner's DDL ---------------------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE ragstore.families SET table_name = 'emb_other' WHERE name = 'docs'",
        "UPDATE ragstore.families SET options = '{\"base_url\": \"http://127.0.0.1:9/v1\"}' WHERE name = 'docs'",
        "DELETE FROM ragstore.families WHERE name = 'docs'",
        "INSERT INTO ragstore.families (name, backend, model, dim, table_name) "
        "VALUES ('evil', 'offline', 'm', 16, 'emb_docs2')",
    ],
)
def test_app_and_reader_cannot_change_the_registry(dsn: str, roles: Roles, statement: str) -> None:
    with connect(dsn) as conn:
        families.create_family(conn, "docs", OfflineBackend())
    for group in ("ragstore_app", "ragstore_reader"):
        _, target = roles.login(group)
        with psycopg.connect(target) as conn:
            assert conn.execute("SELECT table_name FROM ragstore.families").fetchall() == [("emb_docs",)]
            with pytest.raises(pgerrors.InsufficientPrivilege):
                conn.execute(statement)
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT name, table_name, options FROM ragstore.families").fetchall() == [
            ("docs", "emb_docs", {})
        ]


def test_app_bulk_indexes_20000_records_into_an_empty_family(dsn: str, roles: Roles, tmp_path: Path) -> None:
    with connect(dsn) as conn:
        families.create_family(conn, "docs", OfflineBackend())
        reference = conn.execute("SELECT pg_get_indexdef('ragstore.emb_docs_embedding_hnsw'::regclass)").fetchone()
        before = conn.execute("SELECT 'ragstore.emb_docs_embedding_hnsw'::regclass::oid").fetchone()
    _, app_dsn = roles.login("ragstore_app")
    path = tmp_path / "bulk.jsonl"
    with path.open("w") as out:
        for i in range(20_000):
            out.write(json.dumps({"chunk_id": f"c{i:05d}", "package_path": f"pkg/{i % 50}", "text": f"bulk text {i}"}))
            out.write("\n")
    result = run(app_dsn, "index", "docs", str(path), "--json", "--batch-size", "5000")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["inserted"] == 20_000
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM ragstore.emb_docs").fetchone() == (20_000,)
        # the index was dropped for the load (a new index, not the one family create made) and rebuilt exactly
        # as family create makes it
        assert conn.execute("SELECT 'ragstore.emb_docs_embedding_hnsw'::regclass::oid").fetchone() != before
        assert (
            conn.execute("SELECT pg_get_indexdef('ragstore.emb_docs_embedding_hnsw'::regclass)").fetchone() == reference
        )


def test_app_may_not_drop_the_index_of_a_family_that_holds_rows(dsn: str, roles: Roles) -> None:
    with connect(dsn) as conn:
        families.create_family(conn, "docs", OfflineBackend())
        conn.execute(
            "INSERT INTO ragstore.chunks (family, chunk_id, package_path, text, content_sha256, record_sha256) "
            "VALUES ('docs', 'c', 'p', 't', sha256('t'), sha256('t'))"
        )
        conn.execute(
            "INSERT INTO ragstore.emb_docs (chunk_id, package_path, embedding, model, content_sha256) "
            "VALUES ('c', 'p', ragstore.offline_embed('t'), 'm', sha256('t'))"
        )
        conn.commit()
    _, app_dsn = roles.login("ragstore_app")
    with psycopg.connect(app_dsn) as conn:
        with pytest.raises(pgerrors.InsufficientPrivilege):
            conn.execute("DROP INDEX ragstore.emb_docs_embedding_hnsw")
        conn.rollback()
        assert conn.execute("SELECT ragstore.family_bulk_drop_hnsw('docs')").fetchone() == (False,)
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT to_regclass('ragstore.emb_docs_embedding_hnsw')").fetchone() != (None,)


def test_family_tables_made_by_a_superuser_belong_to_ragstore_owner(dsn: str, roles: Roles) -> None:
    with connect(dsn) as conn:
        families.create_family(conn, "docs", OfflineBackend())
    with psycopg.connect(dsn) as conn:
        owner = conn.execute("SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'ragstore.emb_docs'::regclass")
        assert owner.fetchone() == ("ragstore_owner",)
    _, owner_dsn = roles.login("ragstore_owner")
    with psycopg.connect(owner_dsn) as conn:  # the owner side may maintain it
        conn.execute("CLUSTER ragstore.emb_docs USING emb_docs_package_path")
        conn.execute("REINDEX INDEX ragstore.emb_docs_embedding_hnsw")
        conn.commit()
    result = run(owner_dsn, "family", "drop", "docs", "--yes")
    assert result.exit_code == 0, result.output
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT to_regclass('ragstore.emb_docs')").fetchone() == (None,)


@pytest.mark.parametrize("group", ["ragstore_app", "ragstore_reader"])
def test_migrate_as_app_or_reader_is_a_one_line_permission_error(dsn: str, roles: Roles, group: str) -> None:
    name, target = roles.login(group)
    result = run(target, "migrate")
    one_line_error(result, "permission denied", name)
    assert "InFailedSqlTransaction" not in result.output
    assert run(target, "migrate", "--status").exit_code == 0


# -- memory add/import idempotency --------------------------------------------------------------------


def test_memory_add_with_an_id_is_idempotent_and_other_content_is_a_conflict(dsn: str) -> None:
    args = ["memory", "add", "--agent", "ana", "--store", "semantic", "--content", "Deploys need two approvals"]
    first = run(dsn, *args, "--id", "deploy-rule")
    assert first.exit_code == 0 and first.output == "added ana/semantic deploy-rule\n", first.output
    again = run(dsn, *args, "--id", "deploy-rule")  # no --at: a later "now", the same record
    assert again.exit_code == 0 and again.output == "already stored ana/semantic deploy-rule\n", again.output
    other = run(dsn, "memory", "add", "--agent", "ana", "--store", "semantic", "--content", "one approval", "--id",
                "deploy-rule")  # fmt: skip
    one_line_error(other, "deploy-rule", "already exists with another body")
    assert memory_ids(dsn, "ana") == ["deploy-rule"]


def test_memory_import_fills_a_missing_at_like_add(dsn: str, tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text(json.dumps({"id": "n1", "agent": "ana", "store": "episodic", "content": "met the auditor"}) + "\n")
    before = datetime.now(UTC)
    result = run(dsn, "memory", "import", str(path), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["added"] == 1
    with psycopg.connect(dsn) as conn:
        row: Any = conn.execute("SELECT at FROM ragstore.memory WHERE id = 'n1'").fetchone()
    assert before - timedelta(seconds=1) <= row[0] <= datetime.now(UTC)
    again = run(dsn, "memory", "import", str(path), "--json")
    assert again.exit_code == 0 and json.loads(again.output)["existing"] == 1, again.output


def test_reader_recalls_its_agent_without_writing_embeddings(seeded: str, roles: Roles) -> None:
    from ragstore.memory import recall

    _, owner = roles.login("ragstore_owner")
    reader, reader_dsn = roles.login("ragstore_reader")
    bind_agent(owner, "ana", reader)
    profile = AgentProfile(agent="ana", stores=EVERY_STORE)
    with connect(reader_dsn) as conn:
        first = recall(conn, profile, "rollout plan", k=5, now=NOW)
    assert first.pending and first.embedded == 0  # nothing stored by the reader; the lexical leg answers
    assert {h.record.id for h in first.hits} <= {"a-sem", "a-dec"} and first.hits
    with connect(seeded) as conn:  # the owner side (here the superuser) embeds
        recall(conn, profile, "rollout plan", k=5, now=NOW)
    with connect(reader_dsn) as conn:
        second = recall(conn, profile, "rollout plan", k=5, now=NOW)
    assert not second.pending and {h.record.id for h in second.hits} == {"a-sem", "a-dec"}


def test_migrate_gives_family_tables_a_superuser_made_earlier_to_ragstore_owner(dsn: str) -> None:
    from ragstore import migrate

    with connect(dsn) as conn:
        families.create_family(conn, "docs", OfflineBackend())
        conn.execute("ALTER TABLE ragstore.emb_docs OWNER TO current_user")  # as an older version left it
        # As after a change of section grants of ragstore/sql/schema.sql: migrate re-applies it.
        conn.execute("DELETE FROM ragstore.applied_files WHERE name = 'schema.sql:grants'")
        conn.commit()
    assert migrate.upgrade(dsn).replaced == ("schema.sql:grants",)
    with psycopg.connect(dsn) as conn:
        owner = conn.execute("SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'ragstore.emb_docs'::regclass")
        assert owner.fetchone() == ("ragstore_owner",)
        assert conn.execute("SELECT has_table_privilege('ragstore_app', 'ragstore.families', 'UPDATE')").fetchone() == (
            False,
        )


def test_an_owner_member_migrates_without_create_on_the_database(dsn: str, roles: Roles) -> None:
    _, owner = roles.login("ragstore_owner")
    result = run(owner, "migrate")
    assert result.exit_code == 0 and "already at head" in result.output, result.output
