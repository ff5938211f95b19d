"""Shared test set-up: the database fixtures, and a longer timeout for slow and reliability tests."""

from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["tests.fix_db", "tests.fix_storage"]

# Seconds a test marked slow or reliability may take; the others get ``timeout`` from pyproject.toml.
SLOW_TIMEOUT = 900


def pytest_report_header(config: pytest.Config) -> str:
    """One line saying whether the tests marked citus run, and if not why."""
    from ragstore.db.cluster import citus_available

    if citus_available():
        return "citus: Citus is built into the embedded PostgreSQL: the citus tests run"
    return "citus: tests skipped: Citus not built into the embedded PostgreSQL (scripts/build_citus.sh)"


# The folders whose tests run on one xdist worker, as one unit of work, and the xdist_group each one's
# modules declare: the Citus tests share one local cluster (three servers), started once per worker that
# runs any of them. pytest-xdist groups by that mark through the test's node id, which pytest 9.2 no longer
# lets it change (an open pytest-xdist bug): then nothing is grouped, and every worker starts a cluster of its
# own. The scheduler below groups by folder, which holds with either version; the check in
# pytest_collection_modifyitems keeps the folders and the marks the same.
ONE_WORKER = {"tests/citus/": "citus"}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup`` (scripts/test.sh) with the folders of ONE_WORKER each one unit of work; the largest
    unit is handed out first (pytest-xdist's own order), so the Citus tests start at once."""
    if config.getoption("dist", None) != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class FolderGroups(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope: str = super()._split_scope(nodeid)
            if scope != nodeid:  # xdist grouped it by its mark already
                return scope
            return next((group for folder, group in ONE_WORKER.items() if nodeid.startswith(folder)), nodeid)

    return FolderGroups(config, log)


def _check_groups(items: list[pytest.Item], root: Path) -> None:
    for item in items:
        marks = {
            str(mark.args[0] if mark.args else mark.kwargs.get("name")) for mark in item.iter_markers("xdist_group")
        }
        where = item.path.relative_to(root).as_posix()
        folder = {group for prefix, group in ONE_WORKER.items() if where.startswith(prefix)}
        if marks != folder:
            raise pytest.UsageError(
                f"{where}: xdist_group {sorted(marks)} but its folder's group is {sorted(folder)} (tests/conftest.py)"
            )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _check_groups(items, config.rootpath)
    # Slow tests first, so that in a parallel run none of them starts last and keeps one worker busy alone.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    if not config.pluginmanager.hasplugin("timeout"):
        return
    for item in items:
        long = item.get_closest_marker("slow") or item.get_closest_marker("reliability")
        if long and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT))
