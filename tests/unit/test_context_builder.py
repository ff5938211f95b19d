"""Context pack builder: canonical JSON, content ids, budget comparison, validation per layer."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import pytest

from ragstore.context import BuildError, BuildOk, build_context_pack, canonical_json, pack_bytes
from ragstore.context.builder import count_lines, layers_json
from ragstore.context.canonical import estimate_tokens, tokens_for_length
from ragstore.context.models import ContextPack


def _input(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "brief": "Fix the off-by-one in the chunker",
        "repo_map": ["src/b.py", "src/a.py", "README.md", "src/a.py"],
        "files": [
            {"path": "src/b.py", "content": "print('b')\n"},
            {"path": "src/a.py", "content": "x = 'ção'\ny = 2"},
        ],
        "snippets": [{"ref": "[docs/x.md#c1]", "text": "chunk text", "reason": "hand-picked"}],
        "summaries": ["the chunker splits on headings"],
        "state": {"phase": "review", "round": 2, "votes": [1, None, 0.5]},
        "artifacts": ["build/report.html"],
        "constraints": ["no new dependencies"],
        "max_tokens": 1000,
    }
    base.update(overrides)
    return base


def _pack(**overrides: Any) -> ContextPack:
    result = build_context_pack(_input(**overrides))
    assert isinstance(result, BuildOk), result
    return result.pack


def _errors(**overrides: Any) -> BuildError:
    result = build_context_pack(_input(**overrides))
    assert isinstance(result, BuildError)
    return result


def test_canonical_json_sorts_keys_is_compact_and_keeps_unicode() -> None:
    assert canonical_json({"b": 1, "a": ["é", 2.5]}) == '{"a":["é",2.5],"b":1}'


def test_canonical_json_refuses_nan() -> None:
    with pytest.raises(ValueError):
        canonical_json({"x": math.nan})


def test_token_estimate_is_ceil_of_characters_over_four_and_at_least_one() -> None:
    assert [tokens_for_length(n) for n in (0, 1, 4, 5, 8, 9)] == [1, 1, 1, 2, 2, 3]
    assert estimate_tokens("éééééé") == 2  # 8 characters; 14 bytes would give 4


def test_same_input_gives_same_bytes_and_ids() -> None:
    first, second = _pack(), _pack()
    assert pack_bytes(first) == pack_bytes(second)
    assert first.pack_id == second.pack_id and first.manifest_id == second.manifest_id


def test_pack_id_and_manifest_id_are_sha256_of_canonical_layers_and_manifest() -> None:
    pack = _pack()
    text = layers_json(pack.layers)
    assert pack.pack_id == hashlib.sha256(text.encode("utf-8")).hexdigest()
    manifest = json.loads(text)["L7"]
    assert pack.manifest_id == hashlib.sha256(canonical_json(manifest).encode("utf-8")).hexdigest()


def test_one_changed_byte_changes_both_ids() -> None:
    before = _pack()
    after = _pack(
        files=[
            {"path": "src/b.py", "content": "print('c')\n"},
            {"path": "src/a.py", "content": "x = 'ção'\ny = 2"},
        ]
    )
    assert before.pack_id != after.pack_id
    assert before.manifest_id != after.manifest_id


def test_layers_are_normalised_l1_sorted_unique_l2_and_l7_sorted_by_path() -> None:
    pack = _pack()
    assert pack.layers.L1 == ["README.md", "src/a.py", "src/b.py"]
    assert [f.path for f in pack.layers.L2 or []] == ["src/a.py", "src/b.py"]
    manifest = pack.layers.L7 or []
    assert [e.path for e in manifest] == ["src/a.py", "src/b.py"]
    a = manifest[0]
    raw = "x = 'ção'\ny = 2".encode()
    assert (a.sha256, a.bytes, a.lines) == (hashlib.sha256(raw).hexdigest(), len(raw), 2)


def test_file_order_in_input_does_not_change_the_pack() -> None:
    files = _input()["files"]
    assert pack_bytes(_pack(files=list(reversed(files)))) == pack_bytes(_pack())


def test_line_count_counts_a_last_line_without_newline() -> None:
    assert [count_lines(s) for s in ("", "a", "a\n", "a\nb", "\n\n")] == [0, 1, 1, 2, 2]


@pytest.mark.parametrize("offset", [0, -1])
def test_budget_boundary_estimated_equal_to_max_is_within(offset: int) -> None:
    estimated = _pack().budget.estimated_tokens
    pack = _pack(max_tokens=estimated + offset)
    assert pack.budget.estimated_tokens == estimated
    assert pack.budget.within_budget is (offset == 0)


def test_budget_is_a_comparison_the_builder_drops_nothing() -> None:
    pack = _pack(max_tokens=1)
    assert not pack.budget.within_budget
    assert pack.layers.present() == ("L0", "L1", "L2", "L3", "L4", "L5", "L6", "L7")
    assert pack.shed is None


def test_estimate_matches_the_spec_formula() -> None:
    pack = _pack()
    assert pack.budget.estimated_tokens == max(1, math.ceil(len(layers_json(pack.layers)) / 4))


@pytest.mark.parametrize(
    ("override", "loc", "layer"),
    [
        ({"brief": "two\nlines"}, "brief", "L0"),
        ({"brief": "   "}, "brief", "L0"),
        ({"repo_map": ["../etc/passwd"]}, "repo_map[0]", "L1"),
        ({"repo_map": ["/abs/path"]}, "repo_map[0]", "L1"),
        ({"files": [{"path": "a.py"}]}, "files[0].content", "L2"),
        ({"files": [{"path": "a.py", "content": "1"}, {"path": "a.py", "content": "2"}]}, "files", "L2"),
        ({"snippets": [{"ref": "r", "text": "t", "reason": "a\nb"}]}, "snippets[0].reason", "L3"),
        ({"summaries": [""]}, "summaries[0]", "L4"),
        ({"state": {"score": math.nan}}, "state", "L5"),
        ({"state": ["not", "an", "object"]}, "state", "L5"),
        ({"artifacts": ["a\nb"]}, "artifacts[0]", "L6"),
        ({"constraints": [42]}, "constraints[0]", "L6"),
        ({"max_tokens": 0}, "max_tokens", None),
        ({"max_tokens": True}, "max_tokens", None),
        ({"surprise": 1}, "surprise", None),
    ],
)
def test_validation_error_names_the_field_path_and_layer(override: dict[str, Any], loc: str, layer: str | None) -> None:
    errors = _errors(**override).errors
    assert any(e.loc == loc and e.layer == layer for e in errors), errors


def test_validation_reports_every_bad_field_at_once() -> None:
    result = _errors(brief="a\nb", summaries=[""], max_tokens=-1)
    assert {e.loc for e in result.errors} == {"brief", "summaries[0]", "max_tokens"}
    assert "brief (L0)" in result.message()


@pytest.mark.parametrize("bad", [None, 42, "text", ["list"]])
def test_builder_never_raises_on_garbage(bad: Any) -> None:
    assert isinstance(build_context_pack(bad), BuildError)


def test_lone_surrogate_is_a_validation_error_not_a_crash() -> None:
    result = _errors(summaries=["bad \udc80"])
    assert result.errors[0].loc == "summaries[0]"


def test_pack_json_round_trips_through_the_model() -> None:
    pack = _pack()
    again = ContextPack.model_validate_json(pack_bytes(pack))
    assert pack_bytes(again) == pack_bytes(pack)
