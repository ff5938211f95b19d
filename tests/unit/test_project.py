"""The project's packaging and test configuration: test-only tools stay in the dev extra, markers are used."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def names(requirements: list[str]) -> set[str]:
    return {r.split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip().lower() for r in requirements}


def test_test_tools_are_in_the_dev_extra_not_in_the_dependencies():
    runtime = names(PROJECT["project"]["dependencies"])
    dev = names(PROJECT["project"]["optional-dependencies"]["dev"])
    tools = {"testcontainers", "pytest", "pytest-xdist", "pytest-timeout", "hypothesis"}
    assert runtime.isdisjoint(tools)
    assert tools <= dev


def test_every_declared_marker_is_used_by_some_test():
    declared = [m.split(":")[0] for m in PROJECT["tool"]["pytest"]["ini_options"]["markers"]]
    # Test modules, and the fixture plugins, which may mark the runs of a fixture's params (tests/fix_storage.py)
    files = [*(ROOT / "tests").rglob("test_*.py"), *(ROOT / "tests").glob("fix_*.py")]
    sources = [p.read_text(encoding="utf-8") for p in files]
    unused = [m for m in declared if not any(f"pytest.mark.{m}" in text for text in sources)]
    assert declared and unused == []
