"""ragstore.__version__ is the installed distribution's version, the one pyproject.toml declares."""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

from click.testing import CliRunner

import ragstore
from ragstore.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]


def test_version_is_the_installed_distributions() -> None:
    assert ragstore.__version__ == version("ragstore")


def test_version_is_the_one_pyproject_declares() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert ragstore.__version__ == declared


def test_the_cli_prints_the_same_version() -> None:
    result = CliRunner().invoke(cli, ["--version"], catch_exceptions=False)
    assert result.exit_code == 0
    assert ragstore.__version__ in result.output
