"""Shedding: layers L7→L1, never L0; within layers; never over budget unless it says so."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragstore.context import BuildOk, ContextPack, build_context_pack, shed, shed_within_layers
from ragstore.context.builder import layers_json
from ragstore.context.canonical import tokens_for_length
from ragstore.errors import InvalidInput


def _pack(max_tokens: int = 100_000, **overrides: Any) -> ContextPack:
    spec: dict[str, Any] = {
        "brief": "Explain the chunker",
        "repo_map": [f"src/m{i}.py" for i in range(20)],
        "files": [
            {"path": "small.py", "content": "a = 1\n"},
            {"path": "big.py", "content": "b = 2\n" * 200},
            {"path": "mid.py", "content": "c = 3\n" * 40},
        ],
        "snippets": [{"ref": f"[p#{i}]", "text": f"snippet {i} " * 10, "reason": f"rank {i}"} for i in range(1, 6)],
        "summaries": ["a summary " * 20],
        "state": {"phase": "debate", "notes": "x" * 300},
        "artifacts": ["out/report.json"],
        "constraints": ["keep the API " * 10],
        "max_tokens": max_tokens,
    }
    spec.update(overrides)
    result = build_context_pack(spec)
    assert isinstance(result, BuildOk)
    return result.pack


def _size_without(pack: ContextPack, *names: str) -> int:
    return tokens_for_length(len(layers_json(pack.layers.model_copy(update=dict.fromkeys(names)))))


def test_shed_drops_l7_first_then_l6_and_stops_when_it_fits() -> None:
    pack = _pack()
    budget = _size_without(pack, "L7", "L6")
    assert _size_without(pack, "L7") > budget  # dropping L7 alone is not enough
    result = shed(pack, budget)
    assert result.shed is not None
    assert result.shed.dropped_layers == ["L7", "L6"]
    assert result.layers.present() == ("L0", "L1", "L2", "L3", "L4", "L5")
    assert result.budget.within_budget and result.shed.fits
    assert result.manifest_id is None
    assert result.shed.from_pack_id == pack.pack_id != result.pack_id


def test_shed_order_is_l7_down_to_l1() -> None:
    pack = _pack()
    result = shed(pack, _size_without(pack, "L7", "L6", "L5", "L4", "L3", "L2", "L1"))
    assert result.shed is not None
    assert result.shed.dropped_layers == ["L7", "L6", "L5", "L4", "L3", "L2", "L1"]
    assert result.layers.present() == ("L0",)


def test_shed_never_drops_l0_and_says_so_when_l0_alone_does_not_fit() -> None:
    pack = _pack(brief="word " * 50)
    result = shed(pack, 1)
    assert result.shed is not None
    assert result.layers.L0 == pack.layers.L0  # never truncated
    assert result.layers.present() == ("L0",)
    assert not result.shed.fits and not result.budget.within_budget
    assert "even L0 alone" in result.shed.note


def test_shed_of_a_pack_that_fits_changes_no_layer() -> None:
    pack = _pack()
    result = shed(pack, pack.budget.estimated_tokens)
    assert result.pack_id == pack.pack_id
    assert result.shed is not None and result.shed.dropped_layers == [] and result.shed.fits


def test_within_layers_drops_lowest_ranked_snippets_first() -> None:
    pack = _pack()
    snippets = pack.layers.L3 or []
    result = shed_within_layers(pack, pack.budget.estimated_tokens - 1)
    assert result.shed is not None and result.shed.fits
    assert [(d.layer, d.ref) for d in result.shed.dropped_items] == [("L3", snippets[-1].ref)]
    assert result.layers.L3 == snippets[:-1]
    assert result.shed.dropped_layers == []


def test_within_layers_then_drops_largest_files_with_their_manifest_entries() -> None:
    pack = _pack()
    no_snippets = pack.layers.model_copy(update={"L3": []})
    target = tokens_for_length(len(layers_json(no_snippets))) - 1
    result = shed_within_layers(pack, target)
    assert result.shed is not None
    dropped = [(d.layer, d.ref) for d in result.shed.dropped_items]
    assert dropped[:5] == [("L3", f"[p#{i}]") for i in range(5, 0, -1)]
    assert dropped[5] == ("L2", "big.py")
    assert [f.path for f in result.layers.L2 or []] == [e.path for e in result.layers.L7 or []]
    assert "big.py" not in [e.path for e in result.layers.L7 or []]


def test_within_layers_falls_back_to_whole_layers() -> None:
    pack = _pack()
    result = shed_within_layers(pack, 1)
    assert result.shed is not None
    assert result.layers.present() == ("L0",)
    assert result.shed.strategy == "within-layers"
    assert {d.layer for d in result.shed.dropped_items} == {"L2", "L3"}


def test_shedding_twice_keeps_the_first_origin_and_all_drops() -> None:
    pack = _pack()
    once = shed(pack, _size_without(pack, "L7"))
    twice = shed(once, _size_without(pack, "L7", "L6", "L5"))
    assert twice.shed is not None
    assert twice.shed.from_pack_id == pack.pack_id
    assert twice.shed.dropped_layers == ["L7", "L6", "L5"]


@pytest.mark.parametrize("bad", [0, -3, True, 2.5])
def test_shed_rejects_a_bad_budget(bad: Any) -> None:
    with pytest.raises(InvalidInput):
        shed(_pack(), bad)


_texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), min_size=1)
_content = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200)


@st.composite
def _packs(draw: st.DrawFn) -> ContextPack:
    names = draw(st.lists(st.from_regex(r"[a-z]{1,8}\.py", fullmatch=True), unique=True, max_size=6))
    spec = {
        "brief": draw(_texts.filter(lambda s: s.strip() != "")),
        "repo_map": names,
        "files": [{"path": n, "content": draw(_content)} for n in names],
        "snippets": [
            {"ref": f"[p#{i}]", "text": draw(_content), "reason": "r"} for i in range(draw(st.integers(0, 5)))
        ],
        "summaries": draw(st.lists(_texts.filter(lambda s: s.strip() != ""), max_size=3)),
        "state": draw(st.dictionaries(st.text(max_size=5), st.integers(), max_size=3)),
        "constraints": draw(st.lists(_texts.filter(lambda s: s.strip() != ""), max_size=3)),
        "max_tokens": 1,
    }
    result = build_context_pack(spec)
    assert isinstance(result, BuildOk)
    return result.pack


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(pack=_packs(), budget=st.integers(min_value=1, max_value=800), within=st.booleans())
def test_shedding_never_returns_a_pack_over_budget_unless_it_says_so(
    pack: ContextPack, budget: int, within: bool
) -> None:
    result = (shed_within_layers if within else shed)(pack, budget)
    assert result.shed is not None
    real = tokens_for_length(len(layers_json(result.layers)))
    assert result.budget.estimated_tokens == real
    assert result.budget.within_budget == (real <= budget) == result.shed.fits
    if not result.shed.fits:
        assert result.layers.present() == ("L0",)
        assert result.shed.note
    assert result.layers.L0 == pack.layers.L0


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(pack=_packs(), budget=st.integers(min_value=1, max_value=800))
def test_whole_layer_shedding_stops_as_soon_as_it_fits(pack: ContextPack, budget: int) -> None:
    result = shed(pack, budget)
    assert result.shed is not None
    dropped = result.shed.dropped_layers
    assert dropped == ["L7", "L6", "L5", "L4", "L3", "L2", "L1"][: len(dropped)]
    if dropped:  # one layer fewer would not have fitted
        kept_back = pack.layers.model_copy(update=dict.fromkeys(dropped[:-1]))
        assert tokens_for_length(len(layers_json(kept_back))) > budget


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(pack=_packs(), budget=st.integers(min_value=1, max_value=800))
def test_within_layers_stops_as_soon_as_it_fits(pack: ContextPack, budget: int) -> None:
    result = shed_within_layers(pack, budget)
    assert result.shed is not None
    items, layers = result.shed.dropped_items, result.shed.dropped_layers
    if not items or layers:
        return
    last = items[-1]
    if last.layer == "L3":
        back = [s for s in pack.layers.L3 or [] if s.ref == last.ref]
        restored = result.layers.model_copy(update={"L3": [*(result.layers.L3 or []), *back]})
    else:
        keep = {f.path for f in result.layers.L2 or []} | {last.ref}
        restored = result.layers.model_copy(
            update={
                "L2": [f for f in pack.layers.L2 or [] if f.path in keep],
                "L7": [e for e in pack.layers.L7 or [] if e.path in keep],
            }
        )
    assert tokens_for_length(len(layers_json(restored))) > budget
