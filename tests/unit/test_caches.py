"""ragstore.caches: one object, shared by threads, remembers families, estimates and backends."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from ragstore import caches as caches_module
from ragstore.caches import Caches, caches_for
from ragstore.search.vector import RowEstimate


def test_threads_asking_for_one_backend_at_once_make_it_once() -> None:
    memo = Caches()
    made: list[int] = []

    def make() -> Any:
        made.append(1)
        time.sleep(0.05)
        return object()

    got: list[Any] = []
    threads = [threading.Thread(target=lambda: got.append(memo.backend("k", make))) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1 and len({id(b) for b in got}) == 1


def test_estimates_expire(monkeypatch: pytest.MonkeyPatch) -> None:
    memo = Caches()
    key = ("emb_docs", "p/", None)
    memo.remember_estimate(key, RowEstimate(10.0, 100.0))
    assert memo.estimate(key) == RowEstimate(10.0, 100.0)
    monkeypatch.setattr(caches_module, "ESTIMATE_TTL_SECONDS", 0.0)
    memo.remember_estimate(key, RowEstimate(11.0, 100.0))
    assert memo.estimate(key) is None


def test_each_connection_has_its_own_caches_and_they_die_with_it() -> None:
    class Conn:
        pass

    a, b = Conn(), Conn()
    assert caches_for(a) is caches_for(a) and caches_for(a) is not caches_for(b)
    before = len(caches_module._PER_CONNECTION)
    del a
    assert len(caches_module._PER_CONNECTION) == before - 1
