"""The same records give the same bundle bytes in separate processes (different hash seeds)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.data.memory.fixtures import compose_fixture_bytes

ROOT = Path(__file__).resolve().parents[2]


def compose_in_subprocess(hash_seed: str, *args: str) -> bytes:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "tests.data.memory.fixtures", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        check=True,
        timeout=60,
    )
    return result.stdout


@pytest.mark.slow
def test_compose_is_byte_identical_across_processes_and_reader_order() -> None:
    first = compose_in_subprocess("1")
    second = compose_in_subprocess("4242", "--reverse")
    assert first == second
    assert first == compose_fixture_bytes()
    assert first.startswith(b'{"agent":"ana",') and b'"e-new"' in first
