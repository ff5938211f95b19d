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


STREAM_ROWS = 6_000 if SOAK else 3_000
STREAM_BATCH = 100
STREAM_DIM = 8


def _with_vectors(i: int, version: int) -> dict[str, object]:
    return chunk(i, version) | {"vector": [((i * 31 + k * version + k) % 17) / 17 - 0.4 for k in range(STREAM_DIM)]}


def _stream_index(target: str, path: str) -> None:
    with connect(target) as conn:
        index_sources(conn, "vecs", open_sources([path]), batch_size=STREAM_BATCH)


def _streaming(target: str) -> bool:
    """Whether a session of this database holds a streamed bulk load's open transaction (a COPY into the tables)."""
    with psycopg.connect(target, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND state IN ('active', 'idle in transaction') AND query LIKE '%%COPY ragstore.%%'"
        ).fetchone()
    return bool(row and row[0])


def _rows(target: str) -> int:
    with psycopg.connect(target) as conn:
        row = conn.execute("SELECT count(*) FROM ragstore.chunks WHERE family = 'vecs'").fetchone()
    return int(row[0]) if row else 0


@pytest.mark.slow
def test_kill9_during_a_streamed_bulk_load_leaves_nothing_then_rerun_converges(
    dsn: str, clean_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A first load of precomputed vectors is COPied while the pass reads, in one transaction: a kill -9
    # anywhere leaves all of it or nothing, and a rerun reaches the tables of a clean run.
    from ragstore.embed.external import ExternalBackend
    from ragstore.ingest import writer

    monkeypatch.setattr(writer, "BULK_THRESHOLD", 2 * STREAM_BATCH)  # inherited by the forked indexers
    src = write_jsonl(tmp_path / "v.jsonl", (_with_vectors(i, 1) for i in range(STREAM_ROWS)))
    for target in (dsn, clean_dsn):
        with connect(target) as conn:
            families.create_family(conn, "vecs", ExternalBackend("m", STREAM_DIM), options={"dimensions": STREAM_DIM})
    _stream_index(clean_dsn, str(src))
    reference = data_hashes(clean_dsn)

    rng = random.Random(20261201)
    killed_streaming = 0
    for trial in range(TRIALS // 2):
        reset_data(dsn)
        proc = _FORK.Process(target=_stream_index, args=(dsn, str(src)))
        proc.start()
        if rng.random() < 0.25:
            time.sleep(rng.uniform(0.0, 0.5))  # anywhere: start-up, the pass, the COPY, the commit, the build
        else:
            deadline = time.monotonic() + 30
            while not _streaming(dsn) and proc.is_alive() and time.monotonic() < deadline:
                time.sleep(0.002)
            time.sleep(rng.uniform(0.0, 0.1))
        streaming = _streaming(dsn)
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(timeout=30)
        stored = _rows(dsn)
        killed_streaming += streaming and stored == 0
        assert stored in (0, STREAM_ROWS), f"trial {trial}: {stored} rows of a streamed load"
        assert consistent(dsn, "emb_vecs") == [], f"trial {trial}: half-written rows after kill -9"
        _stream_index(dsn, str(src))
        assert data_hashes(dsn) == reference, f"trial {trial} did not converge"
    assert killed_streaming >= TRIALS // 4, killed_streaming
    print(f"kill -9 streamed load: {TRIALS // 2} trials, {killed_streaming} killed while streaming, all converged")


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
