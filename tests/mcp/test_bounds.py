"""The ``max_chars`` budget of the MCP tools' answers (ragstore/mcpserver/tools.py), without a server."""

from __future__ import annotations

import json

import pytest

from ragstore.errors import InvalidInput
from ragstore.mcpserver.tools import MIN_TEXT, bounded


def items(n: int, size: int) -> list[dict[str, object]]:
    return [{"chunk_id": f"c{i}", "text": f"{i}" + "é\n" * size} for i in range(n)]


def test_everything_that_fits_is_kept_whole_without_a_note() -> None:
    answer = json.loads(bounded({"family": "docs"}, "hits", items(3, 10), 20_000))
    assert answer == {"family": "docs", "hits": items(3, 10)}


@pytest.mark.parametrize("limit", [200, 333, 700, 1500, 5000])
def test_an_answer_never_exceeds_the_budget_and_keeps_the_best_first(limit: int) -> None:
    given = items(10, 300)
    text = bounded({"family": "docs"}, "hits", given, limit)
    assert len(text) <= limit
    answer = json.loads(text)
    assert f"max_chars={limit}" in answer["truncated"]
    kept = answer["hits"]
    assert [h["chunk_id"] for h in kept] == [h["chunk_id"] for h in given[: len(kept)]]
    whole, last = kept[:-1], kept[-1:]
    assert whole == given[: len(whole)]
    for hit in last:  # the last one kept is whole, or cut to a prefix ending with an ellipsis
        original = str(given[len(whole)]["text"])
        assert hit["text"] == original or (
            hit["text"].endswith("…") and original.startswith(hit["text"][:-1]) and len(hit["text"]) > MIN_TEXT
        )
    left = int(answer["truncated"].split(" of ")[0])
    assert left == len(given) - len(kept) + (1 if last and last[0] != given[len(whole)] else 0)


def test_a_budget_out_of_range_is_refused() -> None:
    with pytest.raises(InvalidInput, match="max_chars must be from 200"):
        bounded({}, "hits", [], 10)
