"""Crash safety: kill -9 of the indexer at seeded random points, and of the embedded Postgres mid-batch.

Proves: nothing committed is lost and nothing is half-written (every chunk's embedding row matches it right
after the kill), and a rerun converges to exactly the tables of a clean run (content hashes of every table).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from pathlib import Path

import psycopg
import pytest

from ragstore import families, migrate
from ragstore.db.connection import connect
from ragstore.db.server import EmbeddedServer
from ragstore.embed.offline import OfflineBackend
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from tests.reliability.helpers import (
    chunk,
    cli_env,
    consistent,
    data_hashes,
    popen_cli,
    reset_data,
    run_cli,
    write_jsonl,
)

pytestmark = pytest.mark.reliability

SOAK = os.environ.get("RAGSTORE_SOAK") == "1"
TRIALS = 100 if SOAK else 24
ROWS = 2_000 if SOAK else 400
BATCH = 20
_FORK = multiprocessing.get_context("fork")


def _index(target: str, path: Path) -> None:
    with connect(target) as conn:
        index_sources(conn, "docs", open_sources([str(path)]))


def _index_child(target: str, path: str) -> None:
    """The indexer of one trial, in a forked process (what `ragstore index` runs, without its start-up)."""
    with connect(target) as conn:
        index_sources(conn, "docs", open_sources([path]), batch_size=BATCH)


def _committed(target: str, version: int) -> int:
    with psycopg.connect(target) as conn:
        row = conn.execute("SELECT count(*) FROM ragstore.chunks WHERE metadata->>'v' = %s", (str(version),)).fetchone()
    return int(row[0]) if row else 0


def _write_parquet(path: Path, version: int) -> Path:
    import json

    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [chunk(i, version) for i in range(ROWS)]
    columns = {key: [r[key] for r in rows] for key in ("chunk_id", "package_path", "text")}
    columns["metadata"] = [json.dumps(r.get("metadata", {})) for r in rows]
    pq.write_table(pa.table(columns), path, row_group_size=BATCH * 3)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_kill9_of_the_indexer_at_random_points_then_rerun_converges(
    dsn: str, clean_dsn: str, tmp_path: Path, kind: str
) -> None:
    if kind == "parquet":
        old = _write_parquet(tmp_path / "v0.parquet", 0)
        new = _write_parquet(tmp_path / "v1.parquet", 1)
    else:
        old = write_jsonl(tmp_path / "v0.jsonl", (chunk(i, 0) for i in range(ROWS)))
        new = write_jsonl(tmp_path / "v1.jsonl", (chunk(i, 1) for i in range(ROWS)))
    for target in (dsn, clean_dsn):
        with connect(target) as conn:
            families.create_family(conn, "docs", OfflineBackend())
    # References: a clean run of v1 into an empty family, and a clean v0-then-v1 (the update case).
    _index(clean_dsn, new)
    fresh_ref = data_hashes(clean_dsn)
    reset_data(clean_dsn)
    _index(clean_dsn, old)
    _index(clean_dsn, new)
    update_ref = data_hashes(clean_dsn)

    rng = random.Random(20261130)
    killed_with_rows = 0
    for trial in range(TRIALS):
        reset_data(dsn)
        updating = trial % 2 == 1
        if updating:
            _index(dsn, old)
        proc = _FORK.Process(target=_index_child, args=(dsn, str(new)))
        proc.start()
        if rng.random() < 0.2:
            time.sleep(rng.uniform(0.0, 0.3))  # anywhere, connection and validation included
        else:
            deadline = time.monotonic() + 30
            while _committed(dsn, 1) == 0 and proc.is_alive() and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(rng.uniform(0.0, 0.5))
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(timeout=30)
        committed = _committed(dsn, 1)
        killed_with_rows += 0 < committed < ROWS
        assert consistent(dsn) == [], f"trial {trial}: half-written rows after kill -9"
        assert committed % BATCH == 0 or committed == ROWS, f"trial {trial}: a partial batch ({committed})"
        _index(dsn, new)
        assert data_hashes(dsn) == (update_ref if updating else fresh_ref), f"trial {trial} did not converge"
    # The kills must have landed mid-run often enough to mean something.
    assert killed_with_rows >= TRIALS // 2
    print(f"kill -9 indexer: {TRIALS} trials, {ROWS} rows, {killed_with_rows} killed mid-run, all converged")


@pytest.fixture
def own_server(tmp_path_factory: pytest.TempPathFactory):
    home = Path(tmp_path_factory.mktemp("crash-pg"))
    server = EmbeddedServer(home)
    server.ensure_running()
    try:
        yield server
    finally:
        try:
            server.stop()
        except Exception:
            pid = server.running_pid()
            if pid:
                os.kill(pid, signal.SIGKILL)


def test_kill9_of_postgres_during_a_batch_then_restart_and_rerun_converges(
    own_server: EmbeddedServer, clean_dsn: str, tmp_path: Path
) -> None:
    rows = 3_000
    src = write_jsonl(tmp_path / "c.jsonl", (chunk(i, 1) for i in range(rows)))
    target = own_server.dsn()
    migrate.upgrade(target)
    for t in (target, clean_dsn):
        with connect(t) as conn:
            families.create_family(conn, "docs", OfflineBackend())
    _index(clean_dsn, src)
    reference = data_hashes(clean_dsn)

    proc = popen_cli(["--dsn", target, "index", "docs", str(src), "--batch-size", "50", "--no-progress"])
    deadline = time.monotonic() + 60
    while _committed(target, 1) == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)
    pid = own_server.running_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    # The user sees one clear line and a non-zero exit, no traceback.
    assert proc.returncode == 1, (out, err)
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "database" in err or "connection" in err or "server" in err, err

    # postmaster.pid is left behind by the crash: the server is seen as stopped and restarts.
    assert (own_server.data_dir / "postmaster.pid").exists()
    assert own_server.status().running is False
    assert own_server.ensure_running() == target
    assert consistent(target) == []
    _index(target, src)
    assert data_hashes(target) == reference
    print(f"kill -9 postgres: {rows} rows, restart recovered, rerun converged")


def test_server_start_recovers_a_stale_pid_file(own_server: EmbeddedServer, tmp_path: Path) -> None:
    own_server.stop()
    pid_file = own_server.data_dir / "postmaster.pid"
    # A pid file whose process is long gone (as a crash of the whole machine leaves it).
    dead = 2**22 - 7
    pid_file.write_text(f"{dead}\n{own_server.data_dir}\n0\n5432\n{own_server.socket_dir}\n\n0 0\nready\n")
    env = cli_env(RAGSTORE_HOME=str(own_server.home))
    status = run_cli(["server", "status", "--json"], env=env)
    assert status.returncode == 0 and '"running": false' in status.stdout, status
    started = run_cli(["server", "start"], env=env)
    assert started.returncode == 0, started.stderr
    assert own_server.status().running
    with psycopg.connect(own_server.dsn()) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
