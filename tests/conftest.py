"""Shared test set-up: the database fixtures, and a longer timeout for slow and reliability tests."""

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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Slow tests first, so that in a parallel run none of them starts last and keeps one worker busy alone.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    if not config.pluginmanager.hasplugin("timeout"):
        return
    for item in items:
        long = item.get_closest_marker("slow") or item.get_closest_marker("reliability")
        if long and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT))
