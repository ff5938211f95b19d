"""The slices of a batch's embedding (``ragstore.ingest.writer.embed_slices``): every text once, by rising
length, each slice within its character budget unless it is one text."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from ragstore.ingest.writer import embed_slices


@given(st.lists(st.text(max_size=60), max_size=80), st.integers(min_value=1, max_value=200))
def test_slices_hold_every_text_once_by_rising_length_within_the_budget(texts: list[str], budget: int) -> None:
    slices = embed_slices(texts, budget)
    flat = [k for part in slices for k in part]
    assert sorted(flat) == list(range(len(texts)))
    assert [len(texts[k]) for k in flat] == sorted(len(t) for t in texts)
    assert all(part for part in slices)
    assert all(len(part) == 1 or sum(len(texts[k]) for k in part) <= budget for part in slices)
    # A slice is cut only where the next text would not fit.
    for part, following in itertools.pairwise(slices):
        assert sum(len(texts[k]) for k in part) + len(texts[following[0]]) > budget


def test_a_batch_of_short_texts_is_one_slice() -> None:
    assert embed_slices(["bb", "a", "ccc"]) == [[1, 0, 2]]
