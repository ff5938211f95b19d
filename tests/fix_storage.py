"""Run a test once per index storage (vector, halfvec, bit): the ``each_storage`` fixture.

A module opts in with ``pytestmark = pytest.mark.usefixtures("each_storage")``: each of its tests then runs
three times, and every family the test creates without naming a storage (through
``ragstore.families.create_family``, which ``Store``, the adapters and ``ragstore family create`` call) is
created in that run's storage. A test that names a storage keeps it. Nothing else changes: the family row,
its index and the SQL functions all see the storage as a user who chose it would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ragstore import families
from ragstore.families import storage as storages

STORAGES = storages.STORAGES


def _creating_in(storage: str, original: Callable[..., families.Family]) -> Callable[..., families.Family]:
    def create(conn: Any, name: str, backend: Any, *, options: dict[str, Any] | None = None, **rest: Any) -> Any:
        chosen = dict(options or {})
        if storage != "vector" and "storage" not in chosen:
            chosen["storage"] = storage
        return original(conn, name, backend, options=chosen, **rest)

    return create


# The halfvec and bit runs are marked ``other_storage``: the fast tier (docs/guide/operations.md, "Tests")
# runs the vector run only, the whole suite all three. tests/integration/test_storage.py, which names each
# storage itself, runs all three in either tier.
@pytest.fixture(params=[pytest.param(s, marks=() if s == "vector" else pytest.mark.other_storage) for s in STORAGES])
def each_storage(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The storage of this run; families created without one are created in it."""
    storage: str = request.param
    monkeypatch.setattr(families, "create_family", _creating_in(storage, families.create_family))
    return storage


def exhaustive_rerank(conn: Any, name: str) -> families.Family:
    """Family ``name``, with the widest rerank factor when it is a bit family: a small family's rows are then
    all candidates of the Hamming scan, and the re-rank by the full vectors must give the exact answer. For
    the tests that compare HNSW with exact hit for hit: a code of 16 bits (the offline backend's dimension)
    cannot order a thousand rows by itself, which check-recall would show, not such a test."""
    family = families.get_family(conn, name)
    if family.storage != "bit":
        return family
    from ragstore.families.storage_migrate import migrate_storage

    migrate_storage(conn, name, "bit", rerank_factor=storages.MAX_RERANK_FACTOR)
    return families.get_family(conn, name)
