"""The testcontainers path: a throwaway pgvector/pgvector container where a Docker daemon answers.

No machine here has a Docker daemon, so this skips cleanly there; where one answers, it migrates the
container's database and indexes and searches a few chunks.
"""

import json

import pytest

from tests.fix_db import docker_answers


@pytest.mark.skipif(not docker_answers(), reason="no Docker daemon answers: the embedded server is used instead")
def test_migrate_index_search_in_a_pgvector_container(tmp_path):
    from testcontainers.postgres import PostgresContainer

    from ragstore import connect, families, migrate
    from ragstore.embed.offline import OfflineBackend
    from ragstore.ingest.readers import open_sources
    from ragstore.ingest.run import index_sources
    from ragstore.search import search

    with PostgresContainer("pgvector/pgvector:pg17", driver=None) as container:
        dsn = container.get_connection_url()
        assert migrate.upgrade(dsn).changed
        src = tmp_path / "c.jsonl"
        src.write_text(json.dumps({"chunk_id": "a", "package_path": "p", "text": "copy files"}) + "\n")
        with connect(dsn) as conn:
            families.create_family(conn, "docs", OfflineBackend())
            assert index_sources(conn, "docs", open_sources([str(src)])).inserted == 1
            assert [h.chunk_id for h in search(conn, "docs", "copy files", k=1)] == ["a"]


def test_docker_probe_answers_quickly_and_never_raises():
    import time

    started = time.perf_counter()
    answer = docker_answers()
    assert isinstance(answer, bool) and time.perf_counter() - started < 10
