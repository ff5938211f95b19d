"""Validation of memory records, agent profiles and the composition policy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from ragstore.errors import InvalidInput, NotFound
from ragstore.memory import DEFAULT_POLICY, AgentProfile, MemoryRecord, Store, load_profile
from tests.data.memory.fixtures import HERE

BASE: dict[str, Any] = {
    "id": "r1",
    "agent": "ana",
    "store": "episodic",
    "at": "2024-01-01T00:00:00Z",
    "content": "x",
}


def test_record_defaults_salience_and_confidence_to_one_half() -> None:
    record = MemoryRecord.model_validate(BASE)
    assert (record.salience, record.confidence, record.tags, record.metadata) == (0.5, 0.5, (), {})


def test_record_normalises_at_to_utc() -> None:
    record = MemoryRecord.model_validate({**BASE, "at": "2024-01-01T02:00:00+02:00"})
    assert record.at == datetime(2024, 1, 1, tzinfo=UTC) and record.at.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("at", "2024-01-01T00:00:00"),
        ("at", datetime(2024, 1, 1)),
        ("content", ""),
        ("content", " \n\t"),
        ("id", " "),
        ("agent", "ana bob"),
        ("agent", "a" * 65),
        ("store", "dreams"),
        ("salience", 1.0001),
        ("salience", -0.1),
        ("confidence", float("nan")),
        ("confidence", float("inf")),
        ("salience", True),
        ("metadata", {"x": [1.0, float("nan")]}),
        ("surprise", 1),
    ],
)
def test_record_refuses_bad_field(field: str, value: Any) -> None:
    with pytest.raises(ValidationError):
        MemoryRecord.model_validate({**BASE, field: value})


def test_record_accepts_bounds_and_aware_non_utc() -> None:
    at = datetime(2024, 1, 1, tzinfo=timezone(timedelta(hours=-3)))
    record = MemoryRecord.model_validate({**BASE, "at": at, "salience": 0, "confidence": 1})
    assert (record.salience, record.confidence) == (0.0, 1.0)


def test_record_is_frozen() -> None:
    record = MemoryRecord.model_validate(BASE)
    with pytest.raises(ValidationError):
        record.content = "changed"


@pytest.mark.parametrize("name", ["profile_ana.json", "profile_ana.toml"])
def test_load_profile_reads_json_and_toml(name: str) -> None:
    assert load_profile(HERE / name) == AgentProfile(agent="ana", stores=frozenset({Store.EPISODIC, Store.SEMANTIC}))


def test_unknown_store_error_names_file_field_and_store() -> None:
    path = HERE / "profile_unknown_store.json"
    with pytest.raises(InvalidInput) as info:
        load_profile(path)
    message = str(info.value)
    assert str(path) in message and "'stores'" in message and "'dreams'" in message


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("p.json", '{"agent": "ana bob", "stores": ["episodic"]}', "field 'agent'"),
        ("p.json", '{"agent": "ana", "stores": []}', "field 'stores'"),
        ("p.json", '{"agent": "ana", "stores": "episodic"}', "field 'stores'"),
        ("p.json", '{"agent": "ana", "store": ["episodic"]}', "field 'st"),
        ("p.json", '{"agent": "ana",', "not valid JSON"),
        ("p.json", '["ana"]', "must be an object"),
        ("p.toml", 'agent = "ana"\nstores = [1]\n', "field 'stores'"),
        ("p.toml", "agent = ", "not valid TOML"),
        ("p.yaml", "agent: ana", "must be a .json or .toml"),
    ],
)
def test_bad_profiles_raise_invalid_input_naming_the_file(tmp_path: Path, name: str, text: str, expected: str) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InvalidInput) as info:
        load_profile(path)
    assert str(path) in str(info.value) and expected in str(info.value)


def test_profile_not_utf8_is_invalid_input(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_bytes(b'{"agent": "\xff"}')
    with pytest.raises(InvalidInput, match="not UTF-8"):
        load_profile(path)


def test_missing_profile_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match=r"absent\.json"):
        load_profile(tmp_path / "absent.json")


def test_default_policy_is_exactly_spec_7() -> None:
    table = {s.value: (p.min_salience, p.min_confidence, p.cap) for s in Store for p in [DEFAULT_POLICY.for_store(s)]}
    assert table == {
        "episodic": (0.2, None, 10),
        "semantic": (None, 0.3, 10),
        "procedural": (None, None, 5),
        "decision": (None, None, 5),
        "transcript": (None, None, 20),
    }
    assert DEFAULT_POLICY.hint_stores == {Store.SEMANTIC, Store.PROCEDURAL}
