"""The scripts in examples/ run as a user runs them, each in a process of its own on a fresh database
(RAGSTORE_DSN), and say what they did; an example that breaks fails here, so CI runs them all."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def run_example(argv: list[str], dsn: str, tmp_path: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("RAGSTORE_DSN", "RAGSTORE_HOME")}
    env |= {"RAGSTORE_DSN": dsn, "RAGSTORE_HOME": str(tmp_path / "home"), "PATH": f"{BIN}{os.pathsep}{env['PATH']}"}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{argv[-1]} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done.stdout


def test_every_example_is_run_here() -> None:
    scripts = sorted(p.name for p in (ROOT / "examples").iterdir() if p.suffix in (".py", ".sh"))
    assert scripts == ["async_store.py", "cli.sh", "langchain_retriever.py", "llamaindex_index.py", "store.py"]


@pytest.mark.slow  # a dozen ragstore processes, each paying its start-up
def test_cli_quick_start(dsn: str, tmp_path: Path) -> None:
    out = run_example(["bash", str(ROOT / "examples" / "cli.sh")], dsn, tmp_path)
    assert "example_cli: 300 inserted" in out and "example_cli: 0 inserted, 0 updated, 300 unchanged" in out
    assert "man1/cp.1#0]" in out
    assert "would delete" in out and "dropped family example_cli" in out


def test_store(dsn: str, tmp_path: Path) -> None:
    out = run_example([sys.executable, str(ROOT / "examples" / "store.py")], dsn, tmp_path)
    assert "example_store: 4 inserted" in out and "example_store: 0 inserted, 0 updated, 4 unchanged" in out
    assert "missing: ['nope#1']" in out and "deleted 1 chunk" in out and out.rstrip().endswith("done")


def test_async_store(dsn: str, tmp_path: Path) -> None:
    out = run_example([sys.executable, str(ROOT / "examples" / "async_store.py")], dsn, tmp_path)
    assert "16 searches at once" in out and out.rstrip().endswith("done")


@pytest.mark.minilm
@pytest.mark.slow
def test_langchain_retriever(dsn: str, tmp_path: Path) -> None:
    pytest.importorskip("langchain_core")
    out = run_example([sys.executable, str(ROOT / "examples" / "langchain_retriever.py")], dsn, tmp_path)
    assert "retrieved: deploys" in out and "filtered: backups" in out and out.rstrip().endswith("done")


@pytest.mark.minilm
@pytest.mark.slow
def test_llamaindex_index(dsn: str, tmp_path: Path) -> None:
    pytest.importorskip("llama_index.core")
    out = run_example([sys.executable, str(ROOT / "examples" / "llamaindex_index.py")], dsn, tmp_path)
    assert "retrieved: deploys" in out and "after delete: ['backups', 'deploys']" in out
