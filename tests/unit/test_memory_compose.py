"""compose_memory against hand-built fixtures: floors, caps, order, ties, hint, failures, isolation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta, timezone

import pytest

from ragstore.errors import InvalidInput
from ragstore.memory import (
    DEFAULT_POLICY,
    Binding,
    CompositionPolicy,
    MemoryRecord,
    ReadFailure,
    ReadRequest,
    Rejection,
    Store,
    StorePolicy,
    compose_memory,
)
from tests.data.memory.fixtures import (
    NOW,
    T0,
    FailingReader,
    PromiscuousReader,
    StoreReader,
    binding_of,
    load_records,
    rec,
)

E, S, P, D, TR = Store.EPISODIC, Store.SEMANTIC, Store.PROCEDURAL, Store.DECISION, Store.TRANSCRIPT


def ids(bundle_records: tuple[MemoryRecord, ...]) -> list[str]:
    return [r.id for r in bundle_records]


def test_episodic_floor_is_inclusive_at_0_2() -> None:
    records = [
        rec("lo", E, salience=0.19),
        rec("at", E, salience=0.2),
        rec("hi", E, minutes=1, salience=0.21),
    ]
    bundle = compose_memory(binding_of(records), now=NOW)
    assert ids(bundle.records[E]) == ["hi", "at"]


def test_semantic_floor_is_inclusive_at_0_3_on_confidence_not_salience() -> None:
    records = [
        rec("lo", S, confidence=0.29, salience=1.0),
        rec("at", S, confidence=0.3, salience=0.0),
    ]
    bundle = compose_memory(binding_of(records), now=NOW)
    assert ids(bundle.records[S]) == ["at"]


@pytest.mark.parametrize("store", [P, D, TR])
def test_procedural_decision_transcript_have_no_floor(store: Store) -> None:
    records = [rec("zero", store, salience=0.0, confidence=0.0)]
    assert ids(compose_memory(binding_of(records), now=NOW).records[store]) == ["zero"]


@pytest.mark.parametrize(("store", "cap"), [(E, 10), (S, 10), (P, 5), (D, 5), (TR, 20)])
def test_default_caps_keep_the_newest(store: Store, cap: int) -> None:
    records = [rec(f"r{i:02d}", store, minutes=i, salience=0.9, confidence=0.9) for i in range(cap + 3)]
    kept = compose_memory(binding_of(records), now=NOW).records[store]
    assert ids(kept) == [f"r{i:02d}" for i in range(cap + 2, 2, -1)]


def test_newest_first_then_id_ascending_on_ties_by_code_point() -> None:
    records = [
        rec("b", TR, minutes=5),
        rec("a9", TR, minutes=5),
        rec("a10", TR, minutes=5),
        rec("z", TR, minutes=9),
        rec("x1", TR, minutes=5),
        rec("B", TR, minutes=5),
    ]
    # "a10" < "a9" and "B" < "a" by code point: the order `COLLATE "C"` gives, not natural or locale order.
    assert ids(compose_memory(binding_of(records), now=NOW).records[TR]) == ["z", "B", "a10", "a9", "b", "x1"]


def test_tie_at_the_cap_keeps_the_smallest_ids() -> None:
    policy = CompositionPolicy(decision=StorePolicy(cap=2))
    records = [rec(x, D, minutes=1) for x in ("c", "a", "b")]
    assert ids(compose_memory(binding_of(records), now=NOW, policy=policy).records[D]) == ["a", "b"]


def test_ties_compare_instants_not_offsets() -> None:
    plus2 = timezone(timedelta(hours=2))
    same_instant = MemoryRecord(id="b", agent="ana", store=D, at=T0.astimezone(plus2), content="x")
    records = [same_instant, rec("a", D), rec("c", D, minutes=-1)]
    assert ids(compose_memory(binding_of(records), now=NOW).records[D]) == ["a", "b", "c"]


def test_future_records_are_ignored_and_now_itself_is_included() -> None:
    at_now = MemoryRecord(id="now", agent="ana", store=TR, at=NOW, content="x")
    later = MemoryRecord(id="later", agent="ana", store=TR, at=NOW + timedelta(microseconds=1), content="x")
    assert ids(compose_memory(binding_of([at_now, later]), now=NOW).records[TR]) == ["now"]


def test_policy_overrides_floor_and_cap_of_one_store_only() -> None:
    policy = CompositionPolicy(episodic=StorePolicy(cap=1, min_salience=0.5))
    records = [rec("a", E, salience=0.4, minutes=3), rec("b", E, salience=0.6), rec("c", E, salience=0.7)]
    records += [rec(f"t{i}", TR, minutes=i) for i in range(25)]
    bundle = compose_memory(binding_of(records), now=NOW, policy=policy)
    assert ids(bundle.records[E]) == ["b"]  # "a" is newest but under the raised floor; b < c on the tie
    assert len(bundle.records[TR]) == DEFAULT_POLICY.transcript.cap


def test_task_hint_filters_semantic_and_procedural_casefolded() -> None:
    records = [
        rec("s-yes", S, content="Tuning POSTGRES autovacuum"),
        rec("s-no", S, content="tuning mysql"),
        rec("s-fold", S, content="Die Straße ist lang"),
        rec("p-yes", P, content="run postgres backups"),
        rec("p-no", P, content="run backups"),
    ]
    bundle = compose_memory(binding_of(records), now=NOW, task_hint="  Postgres ")
    assert ids(bundle.records[S]) == ["s-yes"]
    assert ids(bundle.records[P]) == ["p-yes"]
    folded = compose_memory(binding_of(records), now=NOW, task_hint="STRASSE")
    assert ids(folded.records[S]) == ["s-fold"]


def test_task_hint_leaves_episodic_decision_transcript_alone() -> None:
    records = [rec("e", E, content="lunch"), rec("d", D, content="lunch"), rec("t", TR, content="lunch")]
    bundle = compose_memory(binding_of(records), now=NOW, task_hint="postgres")
    assert [ids(bundle.records[s]) for s in (E, D, TR)] == [["e"], ["d"], ["t"]]


def test_blank_task_hint_filters_nothing() -> None:
    records = [rec("s", S, content="anything")]
    assert ids(compose_memory(binding_of(records), now=NOW, task_hint="   ").records[S]) == ["s"]


def test_request_carries_pushdown_of_floor_cap_now_and_hint() -> None:
    reader = StoreReader([])
    compose_memory(Binding(agent="ana", readers={S: reader}), now=NOW, task_hint=" PG ")
    assert reader.requests == [
        ReadRequest(store=S, agent="ana", limit=10, not_after=NOW, min_confidence=0.3, task_hint="PG")
    ]


def test_failing_reader_contributes_nothing_and_is_reported_beside_the_bundle() -> None:
    good = StoreReader([rec("e", E)])
    binding = Binding(agent="ana", readers={E: good, S: FailingReader(ConnectionError("db down"))})
    bundle = compose_memory(binding, now=NOW)
    assert ids(bundle.records[E]) == ["e"]
    assert bundle.records[S] == ()
    assert bundle.failures == (ReadFailure(store=S, error="ConnectionError", message="db down"),)
    assert not bundle.ok


def test_reader_failing_half_way_through_iteration_contributes_nothing() -> None:
    class HalfReader:
        def read(self, request: ReadRequest) -> Iterator[MemoryRecord]:
            yield rec("first", D)
            raise TimeoutError("cancelled")

    bundle = compose_memory(Binding(agent="ana", readers={D: HalfReader()}), now=NOW)
    assert bundle.records[D] == ()
    assert [(f.store, f.error) for f in bundle.failures] == [(D, "TimeoutError")]


def test_reader_returning_garbage_is_contained() -> None:
    class NoneReader:
        def read(self, request: ReadRequest) -> None:
            return None

    bundle = compose_memory(Binding(agent="ana", readers={D: NoneReader()}), now=NOW)  # type: ignore[dict-item]
    assert bundle.records[D] == () and bundle.failures[0].error == "TypeError"


def test_other_agents_records_never_appear_and_are_reported() -> None:
    records = [rec("mine", S, content="pg"), rec("bobs", S, agent="bob", content="pg", confidence=1.0)]
    bundle = compose_memory(Binding(agent="ana", readers={S: PromiscuousReader(records)}), now=NOW)
    assert ids(bundle.records[S]) == ["mine"]
    assert all(r.agent == "ana" for r in bundle.all_records())
    assert Rejection(store=S, reason="other_agent", count=1) in bundle.rejections


def test_declared_reader_cannot_smuggle_records_of_another_store() -> None:
    leak = rec("proc", P, content="postgres how-to")
    bundle = compose_memory(Binding(agent="ana", readers={S: PromiscuousReader([leak])}), now=NOW)
    assert bundle.all_records() == ()
    assert bundle.rejections == (Rejection(store=S, reason="other_store", count=1),)


def test_duplicate_ids_keep_the_newest_and_are_reported() -> None:
    records = [rec("x", D, minutes=1, content="old"), rec("x", D, minutes=2, content="new"), rec("y", D)]
    bundle = compose_memory(binding_of(records), now=NOW)
    assert [(r.id, r.content) for r in bundle.records[D]] == [("x", "new"), ("y", "note y")]
    assert bundle.rejections == (Rejection(store=D, reason="duplicate_id", count=1),)


def test_same_id_same_instant_resolves_independently_of_reader_order() -> None:
    one, two = rec("x", D, content="alpha"), rec("x", D, content="beta")
    a = compose_memory(binding_of([one, two]), now=NOW).to_json()
    b = compose_memory(binding_of([two, one]), now=NOW).to_json()
    assert a == b


def test_naive_now_is_refused_before_any_read() -> None:
    reader = StoreReader([])
    with pytest.raises(InvalidInput, match="timezone-aware"):
        compose_memory(Binding(agent="ana", readers={E: reader}), now=NOW.replace(tzinfo=None))
    assert reader.requests == []


def test_fixture_bundle_is_canonical_json_with_utc_z_and_microseconds() -> None:
    data = compose_memory(binding_of(load_records()), now=NOW, task_hint="postgres").to_json()
    text = data.decode("utf-8")
    parsed = json.loads(text)
    assert text == json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert "☕" in text  # raw UTF-8, not \\u escapes
    episodic = parsed["stores"]["episodic"]
    assert [r["id"] for r in episodic] == ["e-new", "e-a", "e-b"]
    assert episodic[0]["at"] == "2024-05-03T09:30:00.000000Z"  # 11:30+02:00 in UTC
    assert [r["id"] for r in parsed["stores"]["semantic"]] == ["s-pg"]


def test_bundle_bytes_do_not_depend_on_reader_order() -> None:
    records = load_records()
    forward = compose_memory(binding_of(records), now=NOW, task_hint="postgres")
    backward = compose_memory(binding_of(records[::-1]), now=NOW, task_hint="postgres")
    assert forward.to_json() == backward.to_json()
    assert forward.bundle_id == backward.bundle_id


def test_markdown_lists_declared_stores_records_and_failures() -> None:
    binding = Binding(
        agent="ana",
        readers={
            E: StoreReader([rec("e1", E, content="line one\nline two")]),
            S: FailingReader(OSError("gone")),
        },
    )
    markdown = compose_memory(binding, now=NOW).to_markdown()
    assert "### episodic (1)" in markdown and "### semantic (0)" in markdown
    assert "[e1] line one\n  line two\n" in markdown
    assert "- semantic: OSError: gone" in markdown
    assert "procedural" not in markdown
