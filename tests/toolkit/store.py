"""Helpers several test modules share (once in integration/test_store.py)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from ragstore import AsyncStore, Store
from ragstore.store_async import AsyncMemory


class LoopThread:
    """An event loop in a thread: ``run(coro)`` waits for its result (so sync tests drive async code)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=120)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


class AsyncAsSync:
    """An AsyncStore with every coroutine method awaited on the loop thread: the Store's interface."""

    def __init__(self, store: AsyncStore, loop: LoopThread) -> None:
        self._store = store
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if isinstance(attr, AsyncMemory):
            return AsyncAsSync(attr, self._loop)  # type: ignore[arg-type]  (store.memory.X(...) awaited too)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            result = attr(*args, **kwargs)
            return self._loop.run(result) if asyncio.iscoroutine(result) else result

        return call


@pytest.fixture(params=["sync", "async"])
def store(request: pytest.FixtureRequest, dsn: str) -> Iterator[Any]:
    if request.param == "sync":
        with Store(dsn, pool_size=4, application_name="ragstore_test_store") as opened:
            yield opened
        return
    loop = LoopThread()
    astore = AsyncStore(dsn, pool_size=4, application_name="ragstore_test_store")
    loop.run(astore.open())
    try:
        yield AsyncAsSync(astore, loop)
    finally:
        loop.run(astore.close())
        loop.stop()
