"""Binding by absence: undeclared stores get no reader, so nothing of theirs can reach the bundle."""

from __future__ import annotations

import pytest

from ragstore.errors import InvalidInput
from ragstore.memory import AgentProfile, Binding, Store, bind, compose_memory, load_profile
from tests.data.memory.fixtures import HERE, NOW, PromiscuousReader, StoreReader, rec, recording_factory

E, S, P, D, TR = Store.EPISODIC, Store.SEMANTIC, Store.PROCEDURAL, Store.DECISION, Store.TRANSCRIPT


def test_bind_calls_the_factory_only_for_declared_stores() -> None:
    calls: list[tuple[Store, str]] = []
    profile = AgentProfile(agent="ana", stores=frozenset({S, E}))
    binding = bind(profile, recording_factory([], calls))
    assert calls == [(E, "ana"), (S, "ana")]
    assert binding.stores == (E, S)
    assert set(binding.readers) == {E, S}


def test_undeclared_store_matching_the_hint_never_appears() -> None:
    # The factory would serve procedural happily, and the procedural record matches the task hint.
    records = [
        rec("p-leak", P, content="postgres: the secret procedure"),
        rec("s-ok", S, content="postgres facts", confidence=0.9),
        rec("e-ok", E),
    ]
    calls: list[tuple[Store, str]] = []
    binding = bind(load_profile(HERE / "profile_ana.json"), recording_factory(records, calls))
    bundle = compose_memory(binding, now=NOW, task_hint="postgres")
    assert P not in bundle.records
    assert "p-leak" not in [r.id for r in bundle.all_records()]
    assert b"p-leak" not in bundle.to_json() and "p-leak" not in bundle.to_markdown()
    assert all(store in (E, S) for store, _ in calls)
    assert [r.id for r in bundle.all_records()] == ["e-ok", "s-ok"]


def test_promiscuous_factory_still_cannot_leak_an_undeclared_store() -> None:
    leak = rec("p-leak", P, content="postgres")
    profile = AgentProfile(agent="ana", stores=frozenset({S}))
    bundle = compose_memory(bind(profile, lambda store, agent: PromiscuousReader([leak])), now=NOW)
    assert bundle.all_records() == ()
    assert list(bundle.records) == [S]


def test_binding_readers_cannot_be_added_after_the_fact() -> None:
    readers = {E: StoreReader([rec("e", E)])}
    binding = Binding(agent="ana", readers=readers)
    readers[P] = StoreReader([rec("p", P)])  # mutating the caller's dict adds nothing
    assert binding.stores == (E,)
    with pytest.raises(TypeError):
        binding.readers[P] = StoreReader([])  # type: ignore[index]
    assert list(compose_memory(binding, now=NOW).records) == [E]


def test_binding_orders_stores_canonically() -> None:
    binding = Binding(agent="ana", readers={TR: StoreReader([]), E: StoreReader([]), D: StoreReader([])})
    assert binding.stores == (E, D, TR)


def test_binding_refuses_a_non_store_key_and_a_non_reader() -> None:
    with pytest.raises(InvalidInput, match="not a memory store"):
        Binding(agent="ana", readers={"procedural": StoreReader([])})  # type: ignore[dict-item]
    with pytest.raises(InvalidInput, match="read"):
        Binding(agent="ana", readers={E: object()})  # type: ignore[dict-item]


def test_factory_returning_a_non_reader_is_refused() -> None:
    with pytest.raises(InvalidInput):
        bind(AgentProfile(agent="ana", stores=frozenset({E})), lambda store, agent: object())  # type: ignore[arg-type,return-value]
