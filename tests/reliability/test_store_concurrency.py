"""Store and AsyncStore under concurrency: 32 threads (or 32 asyncio tasks) x 200 searches while an index
runs on the same Store.

Proves: no search raises; the connections the Store opens (counted in pg_stat_activity by its
application_name, polled every 10 ms) reach its pool size and never exceed it (for AsyncStore, pool_size +
worker_pool_size); every answer equals the answer of the same query run sequentially before the load.
The searches filter on a package and on metadata that the concurrent index never writes, so the right
answer does not move while it runs. That the index really ran DURING the searches is observed, not assumed:
every searcher also probes the rows the index rewrites (each run writes a new version), and the probes
must see at least two versions, i.e. an index run committed between two searches.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import psycopg
import pytest

from ragstore import AsyncStore, Store
from tests.reliability.helpers import Poller

pytestmark = pytest.mark.reliability

WORKERS = 32
SEARCHES = 200
PROBE_EVERY = 10  # every 10th search of a worker also reads the version of the rows the index rewrites
POOL = 6
WORKER_POOL = 2
APP = "ragstore_concurrency"


def stable_records() -> list[dict[str, Any]]:
    return [
        {
            "chunk_id": f"s{i:04d}",
            "package_path": f"stable/{i % 4}",
            "text": f"stable chunk {i} words {i % 7} {i % 11} {i % 13}",
            "metadata": {"set": "stable", "part": i % 3},
        }
        for i in range(400)
    ]


def moving_records(version: int) -> list[dict[str, Any]]:
    return [
        {
            "chunk_id": f"m{i:05d}",
            "package_path": f"moving/{i % 10}",
            "text": f"moving chunk {i} version {version} words {i % 17}",
            "metadata": {"set": "moving", "v": version},
        }
        for i in range(600)
    ]


def queries(dim: int) -> list[tuple[np.ndarray, dict[str, Any]]]:
    rng = np.random.default_rng(7)
    out = []
    for i in range(16):
        q = rng.standard_normal(dim).astype(np.float32)
        flt: dict[str, Any] = {"package": "stable/"} if i % 2 == 0 else {"metadata": {"set": "stable", "part": i % 3}}
        out.append((q, flt))
    return out


class ConnectionCounter(Poller):
    """Polls pg_stat_activity for the Store's application_name; ``peak`` is the most seen at once."""

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn)
        self.peak = 0

    def poll(self, conn: psycopg.Connection[Any]) -> None:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (APP,)).fetchone()
        self.peak = max(self.peak, int(row[0]) if row else 0)


def _key(hits: list[Any]) -> list[tuple[str, float]]:
    return [(h.chunk_id, round(h.score, 6)) for h in hits]


PROBE: dict[str, Any] = {"k": 1, "metadata": {"set": "moving"}}


def _version(hits: list[Any]) -> int:
    """The version of the rewritten rows a probe saw."""
    assert len(hits) == 1
    return int(hits[0].metadata["v"])


def test_store_32_threads_while_indexing(dsn: str) -> None:
    with Store(dsn, pool_size=POOL, application_name=APP) as store:
        fam = store.create_family("docs", "offline")
        store.index(stable_records(), "docs")
        store.index(moving_records(0), "docs")
        qs = queries(fam.dim)
        expected = [_key(store.search("docs", vector=q, k=10, **flt)) for q, flt in qs]
        assert all(len(e) == 10 for e in expected)
        errors: list[str] = []
        mismatches: list[int] = []
        stop = threading.Event()
        index_runs: list[int] = []

        def indexer() -> None:
            version = 1
            while not stop.is_set():
                try:
                    store.index(moving_records(version), "docs", batch_size=200)
                    index_runs.append(version)
                except Exception as exc:  # any failure is a finding
                    errors.append(f"index: {type(exc).__name__}: {exc}")
                version += 1

        def searcher(worker: int) -> None:
            for n in range(SEARCHES):
                i = (worker + n) % len(qs)
                q, flt = qs[i]
                try:
                    got = _key(store.search("docs", vector=q, k=10, **flt))
                except Exception as exc:
                    errors.append(f"search: {type(exc).__name__}: {exc}")
                    continue
                if got != expected[i]:
                    mismatches.append(i)
                if n % PROBE_EVERY == 0:
                    seen.add(_version(store.search("docs", vector=q, **PROBE)))

        seen: set[int] = set()
        with ConnectionCounter(dsn) as counter:
            writer = threading.Thread(target=indexer)
            writer.start()
            threads = [threading.Thread(target=searcher, args=(w,)) for w in range(WORKERS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            stop.set()
            writer.join()
        assert errors == []
        assert mismatches == []
        assert index_runs and len(seen) >= 2, f"no index run committed between two searches: versions seen {seen}"
        assert counter.polls > 0 and counter.peak == POOL


def test_async_store_32_tasks_while_indexing(dsn: str) -> None:
    async def scenario() -> tuple[list[str], list[int], int, list[int], Callable[[], int], set[int]]:
        async with AsyncStore(dsn, pool_size=POOL, worker_pool_size=WORKER_POOL, application_name=APP) as store:
            fam = await store.create_family("docs", "offline")
            await store.index(stable_records(), "docs")
            await store.index(moving_records(0), "docs")
            qs = queries(fam.dim)
            expected = [_key(await store.search("docs", vector=q, k=10, **flt)) for q, flt in qs]
            errors: list[str] = []
            mismatches: list[int] = []
            index_runs: list[int] = []
            done = asyncio.Event()

            async def indexer() -> None:
                version = 1
                while not done.is_set():
                    try:
                        await store.index(moving_records(version), "docs", batch_size=200)
                        index_runs.append(version)
                    except Exception as exc:
                        errors.append(f"index: {type(exc).__name__}: {exc}")
                    version += 1

            async def searcher(worker: int) -> None:
                for n in range(SEARCHES):
                    i = (worker + n) % len(qs)
                    q, flt = qs[i]
                    try:
                        got = _key(await store.search("docs", vector=q, k=10, **flt))
                    except Exception as exc:
                        errors.append(f"search: {type(exc).__name__}: {exc}")
                        continue
                    if got != expected[i]:
                        mismatches.append(i)
                    if n % PROBE_EVERY == 0:
                        seen.add(_version(await store.search("docs", vector=q, **PROBE)))

            seen: set[int] = set()
            with ConnectionCounter(dsn) as counter:
                writing = asyncio.create_task(indexer())
                await asyncio.gather(*(searcher(w) for w in range(WORKERS)))
                done.set()
                await writing
            return errors, mismatches, counter.peak, index_runs, lambda: counter.polls, seen

    errors, mismatches, peak, index_runs, samples, seen = asyncio.run(scenario())
    assert errors == []
    assert mismatches == []
    assert index_runs and len(seen) >= 2, f"no index run committed between two searches: versions seen {seen}"
    assert samples() > 0 and POOL <= peak <= POOL + WORKER_POOL
