"""The ragstore roles on the local Citus cluster: the app indexes and searches, the reader only reads.

Citus opens its connections to the workers as the coordinator's current role: a login role (``alice``),
or, after ``SET ROLE`` and inside the SECURITY DEFINER bulk-load functions, the NOLOGIN group roles
themselves. Each test here logs in as a fresh LOGIN role, the way a DBA sets people up.
"""

import hashlib
import json
import stat
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ragstore import families
from ragstore.cli.main import cli
from ragstore.db.cluster import LocalCluster
from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import PermissionDenied
from ragstore.ingest import writer
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from ragstore.search.api import search
from tests.toolkit.definer_audit import login_role

pytestmark = [pytest.mark.citus, pytest.mark.slow, pytest.mark.xdist_group("citus")]


@pytest.fixture
def app_dsn(citus_dsn: str) -> Iterator[str]:
    yield from login_role(citus_dsn, "ragstore_app")


@pytest.fixture
def reader_dsn(citus_dsn: str) -> Iterator[str]:
    yield from login_role(citus_dsn, "ragstore_reader")


@pytest.fixture
def owner_dsn(citus_dsn: str) -> Iterator[str]:
    yield from login_role(citus_dsn, "ragstore_owner")


# How many HNSW indexes each shard of the family table has.
HNSW_PER_SHARD = """
SELECT result FROM run_command_on_shards('ragstore.emb_appbulk', $$
    SELECT count(*) FROM pg_index i
    JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
    WHERE i.indrelid = '%s'::regclass AND a.amname = 'hnsw'$$)
"""
STATE = "SELECT count(*), max(updated_at) FROM ragstore.chunks WHERE family = 'readrole'"


def as_group(dsn: str, group: str) -> str:
    """The DSN with ``options=-c role=<group>``: the session acts as the group role itself."""
    return make_conninfo(dsn, options=f"-c role={group}")


def text(i: int, word: str = "text") -> str:
    """A text of its own for row i (the offline fingerprint tells such texts apart)."""
    return f"{word} {i} {hashlib.sha256(str(i).encode()).hexdigest()}"


def rows(path: Path, n: int, word: str = "text") -> Path:
    path.write_text(
        "".join(
            json.dumps({"chunk_id": f"r{i:04d}", "package_path": f"pkg/{i % 3}", "text": text(i, word)}) + "\n"
            for i in range(n)
        )
    )
    return path


def test_the_app_indexes_and_searches_on_the_cluster_as_its_login_and_as_the_group(
    citus_dsn: str, app_dsn: str, tmp_path: Path
) -> None:
    with connect(citus_dsn) as conn:
        families.create_family(conn, "approle", OfflineBackend())
    source = rows(tmp_path / "a.jsonl", 60)
    result = CliRunner().invoke(cli, ["--dsn", app_dsn, "index", "approle", str(source), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["inserted"] == 60
    for target in (app_dsn, as_group(app_dsn, "ragstore_app")):
        with connect(target) as conn:
            for mode in ("hnsw", "exact"):
                hits = search(conn, "approle", text(7), mode=mode, k=5)
                assert len(hits) == 5 and hits[0].chunk_id == "r0007", (mode, hits)
            filtered = search(conn, "approle", text(7), mode="hnsw", k=5, package="pkg/1")
            assert len(filtered) == 5 and {h.package_path for h in filtered} == {"pkg/1"}
    # --prune deletes on the shards too, as the group role itself.
    half = rows(tmp_path / "half.jsonl", 30)
    result = CliRunner().invoke(
        cli, ["--dsn", as_group(app_dsn, "ragstore_app"), "index", "approle", str(half), "--prune", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["pruned"] == 30


def test_the_apps_bulk_load_goes_through_the_owners_definer_functions_on_the_cluster(
    citus_dsn: str, app_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bulk load into an empty family drops and rebuilds the HNSW index through SECURITY DEFINER
    functions owned by ragstore_owner: on Citus their DDL reaches the shards as ragstore_owner."""
    monkeypatch.setattr(writer, "BULK_THRESHOLD", 50)
    with connect(citus_dsn) as conn:
        families.create_family(conn, "appbulk", OfflineBackend())
    with connect(app_dsn) as conn:
        report = index_sources(conn, "appbulk", open_sources([str(rows(tmp_path / "b.jsonl", 80))]))
        assert report.inserted == 80
        assert families.has_hnsw_index(conn, families.get_family(conn, "appbulk"))
        hits = search(conn, "appbulk", text(42), mode="hnsw", k=3)
        assert hits[0].chunk_id == "r0042"
    with psycopg.connect(citus_dsn) as conn:
        # The shards of the family table have their HNSW index again, on both workers.
        shards = conn.execute(HNSW_PER_SHARD).fetchall()
        assert shards and all(r == ("1",) for r in shards), shards


def test_a_reader_searches_on_the_cluster_but_cannot_write(citus_dsn: str, reader_dsn: str, tmp_path: Path) -> None:
    with connect(citus_dsn) as conn:
        families.create_family(conn, "readrole", OfflineBackend())
        index_sources(conn, "readrole", open_sources([str(rows(tmp_path / "r.jsonl", 40))]))
        before = conn.execute(STATE).fetchone()
    for target in (reader_dsn, as_group(reader_dsn, "ragstore_reader")):
        with connect(target) as conn:
            assert [h.chunk_id for h in search(conn, "readrole", text(3), mode="exact", k=1)] == ["r0003"]
            assert len(search(conn, "readrole", text(3), mode="hnsw", k=5)) == 5
        changed = rows(tmp_path / "c.jsonl", 5, word="changed")
        with connect(target) as conn, pytest.raises(PermissionDenied, match="permission denied"):
            index_sources(conn, "readrole", open_sources([str(changed)]))
        result = CliRunner().invoke(cli, ["--dsn", target, "index", "readrole", str(changed)])
        assert result.exit_code == 1 and "permission denied" in result.output, result.output
        with psycopg.connect(target, autocommit=True) as conn:
            for statement in ("DELETE FROM ragstore.emb_readrole", "UPDATE ragstore.chunks SET text = 'x'"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(statement)
    with psycopg.connect(citus_dsn) as conn:
        after = conn.execute(STATE).fetchone()
    assert after == before


def test_an_owner_member_creates_a_distributed_family_as_login_and_as_the_group(citus_dsn: str, owner_dsn: str) -> None:
    for target, name in ((owner_dsn, "ownlogin"), (as_group(owner_dsn, "ragstore_owner"), "owngroup")):
        result = CliRunner().invoke(cli, ["--dsn", target, "family", "create", name, "--backend", "offline"])
        assert result.exit_code == 0, result.output
        with psycopg.connect(citus_dsn) as conn:
            placed = conn.execute(
                "SELECT count(DISTINCT nodeport) FROM citus_shards WHERE table_name = %s::regclass",
                (f"ragstore.emb_{name}",),
            ).fetchone()
            owner = conn.execute(
                "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = %s::regclass", (f"ragstore.emb_{name}",)
            ).fetchone()
        assert placed == (2,) and owner == ("ragstore_owner",)
    assert conninfo_to_dict(owner_dsn)["user"].startswith("rs_owner_")


def test_the_nodes_talk_over_their_private_sockets_and_listen_on_no_tcp_port(citus_cluster: LocalCluster) -> None:
    """Privacy as one node: no TCP anywhere, no password to keep; the group roles log in on workers only."""
    nodes = citus_cluster.nodes()
    for node in nodes:
        with psycopg.connect(node.dsn()) as conn:
            assert conn.execute("SHOW listen_addresses").fetchone() == ("",)
            assert conn.execute("SHOW citus.local_hostname").fetchone() == (node.host,)
            logins = dict(
                conn.execute(
                    "SELECT rolname, rolcanlogin FROM pg_roles WHERE rolname IN "
                    "('ragstore_owner', 'ragstore_app', 'ragstore_reader')"
                ).fetchall()
            )
        assert logins == dict.fromkeys(("ragstore_owner", "ragstore_app", "ragstore_reader"), node is not nodes[0])
        assert stat.S_IMODE(node.socket_dir.stat().st_mode) == 0o700
    with psycopg.connect(nodes[0].dsn()) as conn:
        names = conn.execute("SELECT nodename, nodeport FROM pg_dist_node ORDER BY groupid").fetchall()
    assert names == [(node.host, node.port) for node in nodes]
    assert not (citus_cluster.root / "pgpass").exists() and not (citus_cluster.root / "password").exists()


@pytest.mark.parametrize("role", ["reader", "app"])
def test_neither_the_reader_nor_the_app_can_change_the_full_text_statistics_on_the_cluster(
    request: pytest.FixtureRequest, citus_dsn: str, owner_dsn: str, role: str, tmp_path: Path
) -> None:
    """The single-node attempts of tests/integration/test_definer_audit.py, as LOGIN members on the cluster:
    each is refused, and the statistics and a full-text search answer as before."""
    from tests.toolkit.definer_audit import TAMPERING, fails, stats

    name = f"tamper_{role}"
    with connect(owner_dsn) as conn:
        families.create_family(conn, name, OfflineBackend())
    app = request.getfixturevalue("app_dsn")
    with connect(app) as conn:
        index_sources(conn, name, open_sources([str(rows(tmp_path / "t.jsonl", 30))]))
    target = app if role == "app" else request.getfixturevalue("reader_dsn")

    def answers() -> list[tuple[str, float]]:
        with connect(citus_dsn) as conn:
            return [(h.chunk_id, h.score) for h in search(conn, name, text(3), mode="fts", k=10)]

    before, found = stats(owner_dsn, name), answers()
    assert found
    for statement in TAMPERING:
        assert fails(target, statement.replace("'docs'", f"'{name}'")), statement
    assert stats(owner_dsn, name) == before and answers() == found
