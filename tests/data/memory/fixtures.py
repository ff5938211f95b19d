"""Hand-built memory fixtures and fake readers shared by tests/unit/test_memory_*.py.

Run as ``python -m tests.data.memory.fixtures [--reverse]`` it composes ``records.jsonl`` for agent ``ana``
(all five stores, hint "postgres") and writes the bundle's canonical JSON to stdout; the determinism test
runs that in fresh processes and compares the bytes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ragstore.memory import ALL_STORES, Binding, MemoryRecord, ReadRequest, Store, compose_memory

HERE = Path(__file__).resolve().parent
NOW = datetime(2024, 5, 10, 12, 0, tzinfo=UTC)
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def rec(
    id: str,
    store: Store | str = Store.EPISODIC,
    *,
    minutes: int = 0,
    agent: str = "ana",
    content: str | None = None,
    **fields: Any,
) -> MemoryRecord:
    """A record at ``T0 + minutes``; content defaults to ``"note <id>"``."""
    return MemoryRecord(
        id=id,
        agent=agent,
        store=Store(store),
        at=T0 + timedelta(minutes=minutes),
        content=content if content is not None else f"note {id}",
        **fields,
    )


def load_records() -> list[MemoryRecord]:
    """The hand-built records of ``records.jsonl``, validated."""
    lines = (HERE / "records.jsonl").read_text(encoding="utf-8").splitlines()
    return [MemoryRecord.model_validate(json.loads(line)) for line in lines if line.strip()]


class StoreReader:
    """A well-behaved reader: the records of its store and agent, in the order it was given them."""

    def __init__(self, records: Iterable[MemoryRecord]) -> None:
        self.records = list(records)
        self.requests: list[ReadRequest] = []

    def read(self, request: ReadRequest) -> list[MemoryRecord]:
        self.requests.append(request)
        return [r for r in self.records if r.store == request.store and r.agent == request.agent]


class PromiscuousReader:
    """A reader that serves everything it holds to anyone: every store, every agent, no filter."""

    def __init__(self, records: Iterable[MemoryRecord]) -> None:
        self.records = list(records)

    def read(self, request: ReadRequest) -> list[MemoryRecord]:
        return list(self.records)


class FailingReader:
    """A reader whose read raises ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def read(self, request: ReadRequest) -> list[MemoryRecord]:
        raise self.error


def binding_of(records: Iterable[MemoryRecord], stores: Iterable[Store] = ALL_STORES, agent: str = "ana") -> Binding:
    """A binding of ``agent`` with one :class:`StoreReader` over ``records`` per store in ``stores``."""
    held = list(records)
    return Binding(agent=agent, readers={Store(s): StoreReader(held) for s in stores})


def recording_factory(
    records: Iterable[MemoryRecord], calls: list[tuple[Store, str]]
) -> Callable[[Store, str], StoreReader]:
    """A reader factory that would happily serve any store, and logs every call into ``calls``."""
    held = list(records)

    def factory(store: Store, agent: str) -> StoreReader:
        calls.append((store, agent))
        return StoreReader(held)

    return factory


def compose_fixture_bytes(reverse: bool = False) -> bytes:
    """Canonical JSON of composing ``records.jsonl`` for ana with hint "postgres"."""
    records = load_records()
    if reverse:
        records.reverse()
    return compose_memory(binding_of(records), now=NOW, task_hint="postgres").to_json()


if __name__ == "__main__":
    sys.stdout.buffer.write(compose_fixture_bytes(reverse="--reverse" in sys.argv))
