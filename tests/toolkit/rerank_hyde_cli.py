"""Helpers several test modules share (once in cli/test_rerank_hyde_cli.py)."""

from __future__ import annotations

import json

import pytest

from ragstore import families
from ragstore.embed.offline import OfflineBackend
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.run import write_records
from tests.rerank_stub import RerankStub

KEY = "sk-Cl1Qw8Zr5TyUi3OpAsD"


TEXTS = {
    "cp#0": "cp copies files and directories recursively when asked",
    "mv#0": "mv moves and renames files",
    "rm#0": "rm removes files or directories",
    "ls#0": "ls lists directory contents",
}


@pytest.fixture
def store(dsn, conn, tmp_path):
    backend = OfflineBackend()
    fam = families.create_family(conn, "docs", backend)
    write_records(
        conn, fam, backend, [(k, ChunkRecord(chunk_id=k, package_path=k[:2], text=v)) for k, v in TEXTS.items()]
    )
    queries = [("q1", "copy files and directories"), ("q2", "rename files"), ("q3", "list directory contents")]
    (tmp_path / "q.jsonl").write_text("".join(json.dumps({"query_id": q, "text": t}) + "\n" for q, t in queries))
    (tmp_path / "qrels.tsv").write_text("q1\tcp#0\t2\nq2\tmv#0\t1\nq3\tls#0\t1\n")
    return dsn


@pytest.fixture
def stub():
    with RerankStub(scorer=lambda q, d: 100.0 - len(d)) as server:  # shortest text first
        yield server
