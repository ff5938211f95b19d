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


def test_the_license_changelog_classifiers_and_urls_ship() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "Apache-2.0"
    assert "Apache License" in (ROOT / "LICENSE").read_text(encoding="utf-8")[:200]
    assert "Version 2.0" in (ROOT / "LICENSE").read_text(encoding="utf-8")[:200]
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert changelog.startswith("# Changelog") and "\n## Unreleased\n" in changelog
    assert any(c.startswith("Programming Language :: Python :: 3") for c in project["classifiers"])
    assert {"Homepage", "Documentation", "Source"} <= set(project["urls"])
