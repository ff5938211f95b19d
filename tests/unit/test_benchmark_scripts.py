"""Every benchmark script still imports and parses its options on today's code: a refactor that renames or
moves something a benchmark uses fails here, not the next time someone measures."""

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
# Scripts with options (argparse); chunk_window.py takes none and runs its measurement at once.
SCRIPTS = sorted(p for p in BENCHMARKS.glob("[a-z]*.py") if "argparse" in p.read_text(encoding="utf-8"))


def test_the_benchmarks_are_found():
    assert len(SCRIPTS) >= 20


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_a_benchmark_script_imports_and_prints_its_help(script: Path):
    done = subprocess.run(
        [sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=240, cwd=BENCHMARKS.parent
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout
