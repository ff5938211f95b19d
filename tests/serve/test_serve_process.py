"""A real ``ragstore serve`` process on a free 127.0.0.1 port: it answers searches over HTTP, and SIGTERM
lets the request in flight finish (with its answer) before the process exits."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psycopg
import pytest

from ragstore import Store
from ragstore.cli.serve import event_loop_and_parser
from ragstore.serve import tokens
from tests.toolkit.app import bearer, seeded, token  # noqa: F401 (the fixture)
from tests.toolkit.serve_process import answers, free_port, until

pytest.importorskip("uvicorn")


def refuses(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def waiting_on_a_lock(dsn: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
    return bool(row and row[0])


@pytest.mark.slow
def test_serve_answers_searches_and_sigterm_finishes_the_request_in_flight(seeded: str, tmp_path: Path) -> None:  # noqa: F811
    reader = token(seeded, "ragstore_reader")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "RAGSTORE_HOME": str(tmp_path / "home")}
    command = [sys.executable, "-m", "ragstore.cli", "--dsn", seeded, "serve", "--port", str(port)]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        until(lambda: answers(f"{base}/healthz"), "/healthz answered", proc)
        body = {"query": "copies files to topic 3", "k": 5, "mode": "fts"}
        first = httpx.post(f"{base}/v1/families/docs/search", json=body, headers=bearer(reader), timeout=30)
        assert first.status_code == 200, first.text
        with Store(seeded, pool_size=1) as store:
            expected = [h.chunk_id for h in store.search("docs", body["query"], k=5, mode="fts")]
        assert [h["chunk_id"] for h in first.json()["hits"]] == expected and expected

        with psycopg.connect(seeded) as blocker, ThreadPoolExecutor(1) as pool:
            blocker.execute("LOCK TABLE ragstore.chunks IN ACCESS EXCLUSIVE MODE")
            in_flight = pool.submit(
                httpx.post, f"{base}/v1/families/docs/search", json=body, headers=bearer(reader), timeout=120
            )
            until(lambda: waiting_on_a_lock(seeded), "the search waited on the lock", proc)
            proc.send_signal(signal.SIGTERM)
            until(lambda: refuses(port), "the server stopped accepting connections", proc)
            assert proc.poll() is None  # still running: the request is in flight
            blocker.rollback()  # releases the lock: the search finishes
            answer = in_flight.result()
        assert answer.status_code == 200
        assert [h["chunk_id"] for h in answer.json()["hits"]] == expected
        out, err = proc.communicate(timeout=60)
        # uvicorn, once the requests in flight are answered, exits by the signal it caught (as an
        # unhandled SIGTERM would): a supervisor sees the usual status.
        assert proc.returncode in (0, -signal.SIGTERM), err
        assert reader not in (out + err).decode()
        assert f"http://127.0.0.1:{port} on {event_loop_and_parser()}" in err.decode()  # what uvicorn runs on
        assert (tokens.parse(reader) or (0, reader))[1] not in (out + err).decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_non_loopback_host_is_refused_without_allow_remote(seeded: str) -> None:  # noqa: F811
    from click.testing import CliRunner

    from ragstore.cli.main import cli

    result = CliRunner().invoke(cli, ["--dsn", seeded, "serve", "--host", "0.0.0.0"])
    assert result.exit_code == 1
    assert "not a loopback address" in result.output and "--allow-remote" in result.output


def test_second_stage_options_without_their_endpoint_are_usage_errors(seeded: str) -> None:  # noqa: F811
    from click.testing import CliRunner

    from ragstore.cli.main import cli

    for args, message in (
        (["--reranker-model", "m"], "--reranker-model is used only with --reranker-url"),
        (["--hyde-url", "http://127.0.0.1:9/v1"], "--hyde-url is used only with --hyde"),
        (["--hyde"], "--hyde needs --hyde-url"),
    ):
        result = CliRunner().invoke(cli, ["--dsn", seeded, "serve", *args])
        assert result.exit_code == 2 and message in result.output, result.output
