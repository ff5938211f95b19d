"""Concurrent adds and deletes of the same ids through the adapters: none of the calls fails, and the
family stays whole (every chunk has its vector row and every vector row its chunk)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

from langchain_core.embeddings import DeterministicFakeEmbedding
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

from ragstore.families import get_family
from ragstore.integrations import langchain, llamaindex
from ragstore.store import Store
from tests.toolkit.roles import end_sessions

WRITERS = 3
ROUNDS = 12
IDS = [f"id{i:02d}" for i in range(24)]


@pytest.fixture
def app_dsn(dsn: str) -> Iterator[str]:
    """A LOGIN member of ragstore_app, as an application connects."""
    name = f"rs_app_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE ragstore_app").format(sql.Identifier(name)))
    try:
        yield make_conninfo(dsn, user=name)
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            end_sessions(admin, name)
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def run_all(jobs: list[Callable[[int], None]]) -> list[BaseException]:
    """Run each job ``ROUNDS`` times in its own thread, all starting together; the exceptions raised."""
    failures: list[BaseException] = []
    start = threading.Barrier(len(jobs))

    def worker(job: Callable[[int], None]) -> None:
        start.wait()
        for round_ in range(ROUNDS):
            try:
                job(round_)
            except BaseException as exc:  # counted, not raised: every failure is the test's finding
                failures.append(exc)

    threads = [threading.Thread(target=worker, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures


def assert_whole(dsn: str, family: str) -> None:
    with psycopg.connect(dsn) as conn:
        table = get_family(conn, family).table
        orphans = conn.execute(
            sql.SQL(
                "SELECT (SELECT count(*) FROM ragstore.chunks c WHERE c.family = %(f)s AND NOT EXISTS "
                "(SELECT 1 FROM ragstore.{t} e WHERE e.chunk_id = c.chunk_id)), "
                "(SELECT count(*) FROM ragstore.{t} e WHERE NOT EXISTS "
                "(SELECT 1 FROM ragstore.chunks c WHERE c.family = %(f)s AND c.chunk_id = e.chunk_id))"
            ).format(t=sql.Identifier(table)),
            {"f": family},
        ).fetchone()
    assert orphans == (0, 0)


@pytest.mark.slow
@pytest.mark.parametrize("stores", [1, 2], ids=["one-store", "two-stores"])
def test_langchain_adds_and_deletes_of_the_same_ids_never_fail(dsn, app_dsn, stores):
    embedding = DeterministicFakeEmbedding(size=8)
    langchain.RagstoreVectorStore(embedding, family="race", dsn=dsn).close()  # created by the owner side
    opened = [Store(app_dsn, pool_size=WRITERS + 1) for _ in range(stores)]
    try:
        vs = [langchain.RagstoreVectorStore(embedding, family="race", store=s) for s in opened]

        def writer(n: int) -> Callable[[int], None]:
            def job(round_: int) -> None:
                vs[n % stores].add_texts([f"text {i} from {n} in {round_}" for i in IDS], ids=IDS)

            return job

        def deleter(round_: int) -> None:
            vs[-1].delete(IDS[round_ % 2 :: 2])

        failures = run_all([writer(n) for n in range(WRITERS)] + [deleter])
        assert [repr(f) for f in failures] == []
    finally:
        for s in opened:
            s.close()
    assert_whole(dsn, "race")


@pytest.mark.slow
@pytest.mark.parametrize("stores", [1, 2], ids=["one-store", "two-stores"])
def test_llamaindex_adds_and_deletes_of_the_same_nodes_never_fail(dsn, app_dsn, stores):
    llamaindex.RagstoreVectorStore("race", dsn, embed_dim=2, model_name="m").close()
    opened = [Store(app_dsn, pool_size=WRITERS + 1) for _ in range(stores)]
    try:
        vs = [llamaindex.RagstoreVectorStore("race", embed_dim=2, model_name="m", store=s) for s in opened]

        def nodes(n: int, round_: int) -> list[TextNode]:
            return [
                TextNode(
                    text=f"text {i} from {n} in {round_}",
                    id_=node_id,
                    relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=f"doc{i % 4}")},
                    embedding=[1.0, float(i)],
                )
                for i, node_id in enumerate(IDS)
            ]

        def writer(n: int) -> Callable[[int], None]:
            return lambda round_: vs[n % stores].add(nodes(n, round_))

        def deleter(round_: int) -> None:
            if round_ % 2:
                vs[-1].delete(f"doc{round_ % 4}")
            else:
                vs[-1].delete_nodes(IDS[::3])

        failures = run_all([writer(n) for n in range(WRITERS)] + [deleter])
        assert [repr(f) for f in failures] == []
    finally:
        for s in opened:
            s.close()
    assert_whole(dsn, "race")
