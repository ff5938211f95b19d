"""``ragstore search --vector-file``: regular files only, a size limit, numbers only, float32's range checked
in one line (no NumPy warning), as a user runs it (a subprocess: what reaches stderr is what they see)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from ragstore.cli.main import cli
from tests.toolkit.external_cli import vectors, write_records


@pytest.fixture
def ext(dsn: str, tmp_path: Path) -> str:
    runner = CliRunner()
    runner.invoke(
        cli, ["--dsn", dsn, "family", "create", "ext", "--backend", "external", "--dimensions", "4", "--model", "m4"]
    )
    result = runner.invoke(cli, ["--dsn", dsn, "index", "ext", str(write_records(tmp_path / "c.jsonl", vectors(5, 4)))])
    assert result.exit_code == 0, result.output
    return dsn


def _search(dsn: str, path: Path | str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RAGSTORE_HOME": str(tmp_path / "home")}
    args = [sys.executable, "-m", "ragstore.cli", "--dsn", dsn, "search", "ext", "--vector-file", str(path)]
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)


def _one_line(done: subprocess.CompletedProcess[str], words: str) -> None:
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert words in lines[0] and "internal error" not in lines[0], lines[0]


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("[0.1, 1e39, 0.2, 0.3]", "value 1e+39 at position 1 is beyond float32"),
        ("[0.1, 0.2, -3.5e38, 0.3]", "value -3.5e+38 at position 2 is beyond float32"),
        ('[0.1, "0.2", 0.3, 0.4]', "value '0.2' at position 1 is not a number"),
        ("[0.1, 0.2, true, 0.4]", "value True at position 2 is not a number"),
        ("[0.1, 0.2, 0.3, null]", "value None at position 3 is not a number"),
        ("[0.1, [0.2], 0.3, 0.4]", "value [0.2] at position 1 is not a number"),
    ],
)
def test_a_json_vector_file_holds_float32_numbers_only(ext: str, tmp_path: Path, content: str, words: str) -> None:
    path = tmp_path / "q.json"
    path.write_text(content)
    _one_line(_search(ext, path, tmp_path), words)


def test_a_npy_vector_file_of_text_or_out_of_range_values_is_one_line(ext: str, tmp_path: Path) -> None:
    text = tmp_path / "t.npy"
    np.save(text, np.array(["0.1", "0.2", "0.3", "0.4"]))
    _one_line(_search(ext, text, tmp_path), "a .npy query vector holds numbers")
    wide = tmp_path / "w.npy"
    np.save(wide, np.array([0.1, 0.2, 0.3, 1e300]))
    _one_line(_search(ext, wide, tmp_path), "value 1e+300 at position 3 is beyond float32")


def test_a_fifo_is_refused_without_reading(ext: str, tmp_path: Path) -> None:
    fifo = tmp_path / "q.json"
    os.mkfifo(fifo)  # nobody writes to it: a read would wait for ever
    _one_line(_search(ext, fifo, tmp_path), "not a regular file (a FIFO)")


def test_a_device_is_refused_without_reading(ext: str, tmp_path: Path) -> None:
    _one_line(_search(ext, "/dev/zero", tmp_path), "not a regular file (a device)")


def test_a_file_over_the_limit_is_refused(ext: str, tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_text("[" + ", ".join(["0.1"] * 1_200_000) + "]")
    _one_line(_search(ext, big, tmp_path), "over 4 MB")


def test_a_good_vector_file_still_searches(ext: str, tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    path.write_text(json.dumps([float(x) for x in vectors(5, 4)[2]]))
    result = CliRunner().invoke(cli, ["--dsn", ext, "search", "ext", "--vector-file", str(path), "-k", "1", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["hits"][0]["chunk_id"] == "c2"


def test_the_library_refuses_a_value_beyond_float32_without_a_warning(dsn: str, ext: str) -> None:
    import warnings

    from ragstore import Store
    from ragstore.errors import InvalidInput

    with Store(dsn) as store, warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(InvalidInput, match=r"value 1e\+39 at position 0 is beyond float32"):
            store.search("ext", vector=[1e39, 0.0, 0.0, 0.0])
