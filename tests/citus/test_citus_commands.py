"""check-recall, eval and agent memory on the local Citus cluster, against one node where they must agree."""

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import errors as pgerrors
from psycopg import sql
from psycopg.conninfo import make_conninfo

from ragstore import families
from ragstore.cli.main import cli
from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from ragstore.memory import AgentProfile, MemoryRecord, Store, add_records, compose_from_db, grant_agent, recall
from ragstore.search.recall import sweep_recall
from tests.toolkit.roles import end_sessions

pytestmark = [pytest.mark.citus, pytest.mark.slow, pytest.mark.xdist_group("citus")]

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample.jsonl"
T0 = datetime(2026, 6, 1, tzinfo=UTC)
NOW = T0 + timedelta(days=1)


def sample_family(target: str, name: str) -> None:
    with connect(target) as conn:
        families.create_family(conn, name, OfflineBackend())
        conn.commit()
        index_sources(conn, name, open_sources([str(SAMPLE)]))


def test_check_recall_and_its_sweep_run_on_the_cluster(citus_dsn: str) -> None:
    sample_family(citus_dsn, "recallcli")
    for extra in ([], ["--package", "man1/"]):
        result = CliRunner().invoke(
            cli,
            [
                "--dsn",
                citus_dsn,
                "check-recall",
                "recallcli",
                "--samples",
                "30",
                "--min-recall",
                "0.95",
                "--json",
                *extra,
            ],
        )
        assert result.exit_code == 0, result.output
        report = json.loads(result.output)
        assert report["queries"] == 30 and report["recall"] >= 0.95 and report["passed"] is True, report
    with connect(citus_dsn) as conn:
        # ef_search reaches the shards: a tiny ef_search may lose recall, a large one finds the exact top k.
        curve = sweep_recall(conn, "recallcli", [10, 400], k=10, samples=20)
    assert [r.ef_search for r in curve] == [10, 400]
    assert curve[1].recall == 1.0 and curve[0].recall <= curve[1].recall


def test_eval_on_the_cluster_gives_the_same_metrics_as_one_node(citus_dsn: str, dsn: str, tmp_path: Path) -> None:
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines()[:40]]
    queries = tmp_path / "q.jsonl"
    queries.write_text(
        "".join(json.dumps({"query_id": f"q{i}", "text": r["text"][:60]}) + "\n" for i, r in enumerate(rows))
    )
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("".join(f"q{i}\t{r['chunk_id']}\t1\n" for i, r in enumerate(rows)))
    metrics = {}
    for name, target in (("cluster", citus_dsn), ("single", dsn)):
        sample_family(target, "evalfam")
        args = ["--dsn", target, "eval", "evalfam", "--queries", str(queries), "--qrels", str(qrels)]
        result = CliRunner().invoke(cli, [*args, "--mode", "exact", "--mode", "hnsw", "-k", "5", "--json", "-"])
        assert result.exit_code == 0, result.output
        data = json.loads(result.output)
        assert [m["label"] for m in data["modes"]] == ["exact", "hnsw"]
        metrics[name] = [m["metrics"] for m in data["modes"]]
    assert metrics["cluster"] == metrics["single"]
    assert metrics["cluster"][0]["hit"] > 0  # metrics that say something, the same on both


def rec(id_: str, agent: str, store: str, content: str) -> MemoryRecord:
    return MemoryRecord(id=id_, agent=agent, store=Store(store), at=T0, content=content, confidence=0.9)


@pytest.fixture
def bound_app(citus_dsn: str) -> Iterator[str]:
    """Memory of ana and bob on the cluster, and a LOGIN member of ragstore_app bound to ana by the owner."""
    role = f"rs_mem_{uuid.uuid4().hex[:8]}"
    ident = sql.Identifier(role)
    with connect(citus_dsn) as conn:
        conn.execute("DELETE FROM ragstore.agent_principals WHERE agent IN ('ana', 'bob')")
        add_records(
            conn,
            [
                rec(f"a-sem-{role}", "ana", "semantic", "ana knows the rollout plan"),
                rec(f"a-dec-{role}", "ana", "decision", "ana decided the rollout plan is secret"),
                rec(f"b-sem-{role}", "bob", "semantic", "bob knows the rollout plan too"),
            ],
        )
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE ragstore_app").format(ident))
        conn.commit()
        grant_agent(conn, "ana", role)
        conn.commit()
    yield make_conninfo(citus_dsn, user=role)
    with psycopg.connect(citus_dsn, autocommit=True) as conn:
        end_sessions(conn, role)
        conn.execute("DELETE FROM ragstore.agent_principals WHERE role_name = %s", (role,))
        conn.execute(sql.SQL("DROP OWNED BY {}").format(ident))
        conn.execute(sql.SQL("DROP ROLE {}").format(ident))


def test_memory_with_row_level_security_on_the_cluster_as_on_one_node(citus_dsn: str, bound_app: str) -> None:
    role = make_conninfo(bound_app).split("user=")[1].split()[0]
    with connect(citus_dsn) as conn:
        placed = conn.execute(
            "SELECT count(*) FROM pg_dist_partition WHERE logicalrelid = 'ragstore.memory'::regclass"
        ).fetchone()
        assert placed == (0,)  # memory stays on the coordinator, with its policies
    with psycopg.connect(bound_app) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM ragstore.memory ORDER BY id").fetchall()]
        assert ids == [f"a-dec-{role}", f"a-sem-{role}"]
        conn.execute("SELECT set_config('ragstore.agent', 'bob', false)")
        assert conn.execute("SELECT count(*) FROM ragstore.memory WHERE agent = 'bob'").fetchone() == (0,)
        with pytest.raises(pgerrors.InsufficientPrivilege, match="row-level security"):
            conn.execute(
                "INSERT INTO ragstore.memory (agent, id, store, at, content) "
                "VALUES ('bob', 'x', 'semantic', now(), 'forged')"
            )
    for statement in ("UPDATE ragstore.memory SET content = 'changed'", "DELETE FROM ragstore.memory"):
        with psycopg.connect(bound_app) as conn, pytest.raises(pgerrors.InsufficientPrivilege):
            conn.execute(statement)
    with connect(bound_app) as conn:
        add_records(conn, [rec(f"a-new-{role}", "ana", "semantic", "ana learned the rollback plan")])
        conn.commit()
        profile = AgentProfile(agent="ana", stores=["semantic", "decision"])
        bundle = compose_from_db(conn, profile, now=NOW)
        assert bundle.ok and {r.id for r in bundle.all_records()} == {f"a-sem-{role}", f"a-dec-{role}", f"a-new-{role}"}
        hits = recall(conn, profile, "the rollback plan", k=10, now=NOW).hits
        assert hits and {h.record.agent for h in hits} == {"ana"}
        assert list(compose_from_db(conn, AgentProfile(agent="bob", stores=["semantic"]), now=NOW).all_records()) == []
        assert recall(conn, AgentProfile(agent="bob", stores=["semantic"]), "rollout plan", k=10, now=NOW).hits == ()
