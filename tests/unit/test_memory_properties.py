"""Property tests of compose_memory: caps, floors, order, isolation and determinism hold for any records."""

from __future__ import annotations

import random
from datetime import timedelta
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragstore.memory import Binding, CompositionPolicy, MemoryRecord, Store, StorePolicy, compose_memory
from ragstore.memory.compose import normalize_hint
from tests.data.memory.fixtures import NOW, PromiscuousReader, binding_of

WORDS = ["pg", "PG", "vector", "Straße", "strasse", "lunch", "index"]

records_st = st.builds(
    MemoryRecord,
    id=st.sampled_from([f"id{i}" for i in range(12)]),
    agent=st.sampled_from(["ana", "ana", "ana", "bob"]),
    store=st.sampled_from(list(Store)),
    # A few instants (some after NOW) so that ties and future records are common.
    at=st.integers(-4, 2).map(lambda m: NOW + timedelta(minutes=m)),
    content=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
    salience=st.sampled_from([0.0, 0.1, 0.2, 0.3, 0.5, 1.0]),
    confidence=st.sampled_from([0.0, 0.29, 0.3, 0.31, 1.0]),
)
store_policy_st = st.builds(
    StorePolicy,
    cap=st.integers(0, 6),
    min_salience=st.none() | st.sampled_from([0.0, 0.2, 0.5]),
    min_confidence=st.none() | st.sampled_from([0.0, 0.3, 0.9]),
)
policy_st = st.builds(
    CompositionPolicy,
    episodic=store_policy_st,
    semantic=store_policy_st,
    procedural=store_policy_st,
    decision=store_policy_st,
    transcript=store_policy_st,
)
stores_st = st.sets(st.sampled_from(list(Store)), min_size=1)
hint_st = st.none() | st.sampled_from(["pg", "STRASSE", " vector ", ""])


def oracle(records: list[MemoryRecord], store: Store, policy: CompositionPolicy, hint: str | None) -> list[str]:
    """A deliberately naive restatement of the composition rules for one store of agent ana."""
    p = policy.for_store(store)
    folded = normalize_hint(hint) if store in policy.hint_stores else None
    mine = [
        r
        for r in records
        if r.agent == "ana"
        and r.store == store
        and r.at <= NOW
        and (p.min_salience is None or r.salience >= p.min_salience)
        and (p.min_confidence is None or r.confidence >= p.min_confidence)
        and (folded is None or folded in r.content.casefold())
    ]
    newest: dict[str, MemoryRecord] = {}
    for r in mine:
        if r.id not in newest or r.at > newest[r.id].at:
            newest[r.id] = r
    by_id = sorted(newest.values(), key=lambda r: r.id)
    return [r.id for r in sorted(by_id, key=lambda r: r.at, reverse=True)][: p.cap]  # stable sort


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(records_st, max_size=40), policy_st, stores_st, hint_st)
def test_bundle_obeys_floors_caps_order_and_isolation(
    records: list[MemoryRecord], policy: CompositionPolicy, stores: set[Store], hint: str | None
) -> None:
    bundle = compose_memory(binding_of(records, stores), now=NOW, task_hint=hint, policy=policy)
    assert set(bundle.records) == stores
    for store, kept in bundle.records.items():
        p = policy.for_store(store)
        assert len(kept) <= p.cap
        assert all(p.admits(r) and r.at <= NOW and r.agent == "ana" and r.store == store for r in kept)
        for newer, older in pairwise(kept):
            assert newer.at > older.at or (newer.at == older.at and newer.id < older.id)
        assert [r.id for r in kept] == oracle(records, store, policy, hint)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.lists(records_st, max_size=40), stores_st, hint_st, st.randoms(use_true_random=False))
def test_bundle_bytes_do_not_depend_on_record_order(
    records: list[MemoryRecord], stores: set[Store], hint: str | None, rnd: random.Random
) -> None:
    shuffled = list(records)
    rnd.shuffle(shuffled)
    a = compose_memory(binding_of(records, stores), now=NOW, task_hint=hint).to_json()
    b = compose_memory(binding_of(shuffled, stores), now=NOW, task_hint=hint).to_json()
    assert a == b


@settings(max_examples=150, deadline=None)
@given(st.lists(records_st, max_size=40), stores_st)
def test_promiscuous_readers_never_leak_other_stores_or_agents(records: list[MemoryRecord], stores: set[Store]) -> None:
    binding = Binding(agent="ana", readers={s: PromiscuousReader(records) for s in stores})
    bundle = compose_memory(binding, now=NOW)
    assert set(bundle.records) == stores
    assert all(r.agent == "ana" and r.store in stores for r in bundle.all_records())
    for store, kept in bundle.records.items():
        assert all(r.store == store for r in kept)
