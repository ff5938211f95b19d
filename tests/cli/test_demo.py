"""scripts/demo.sh keeps its data where commands typed by hand look, and says so.

It runs the demo itself (with the installed .venv, without reinstalling) in a fresh per-user data folder,
then a plain ``ragstore family list`` in the same environment must see the demo's families.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RAGSTORE = ROOT / ".venv" / "bin" / "ragstore"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.minilm,
    pytest.mark.skipif(
        not RAGSTORE.exists() or Path(sys.prefix).resolve() != (ROOT / ".venv").resolve(),
        reason="the demo runs the repository's .venv; these tests run from another environment",
    ),
]


def test_after_the_demo_hand_typed_commands_see_its_families(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RAGSTORE_HOME", "RAGSTORE_DSN")}
    env |= {"XDG_DATA_HOME": str(tmp_path / "data"), "RAGSTORE_SKIP_INSTALL": "1"}
    home = tmp_path / "data" / "ragstore"
    try:
        demo = subprocess.run(
            ["bash", str(ROOT / "scripts" / "demo.sh")], env=env, capture_output=True, text=True, timeout=600
        )
        assert demo.returncode == 0, demo.stderr[-2000:]
        # It says where the data is, that the server keeps running, and how to stop it.
        assert str(home) in demo.stdout and "keeps running" in demo.stdout and "ragstore server stop" in demo.stdout
        listed = subprocess.run(
            [str(RAGSTORE), "family", "list"], env=env, capture_output=True, text=True, timeout=120, check=True
        )
        names = {line.split()[0] for line in listed.stdout.splitlines() if line.strip()}
        assert {"sample", "sample_minilm"} <= names, listed.stdout
    finally:
        subprocess.run([str(RAGSTORE), "server", "stop"], env=env, capture_output=True, timeout=120)
