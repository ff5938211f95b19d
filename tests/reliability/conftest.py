"""Fixtures of the reliability scenarios: a second fresh database for the clean reference run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fix_db import _drop_database, _fresh_database, with_database


@pytest.fixture
def clean_dsn(pg_admin_dsn: str, template_db: str) -> Iterator[str]:
    """Another fresh migrated database, where the clean single run is made for comparison."""
    name = _fresh_database(pg_admin_dsn, template_db)
    yield with_database(pg_admin_dsn, name)
    _drop_database(pg_admin_dsn, name)
