import itertools

from hypothesis import given
from hypothesis import strategies as st

from ragstore.ingest import chunker
from ragstore.ingest.chunker import chunk_text


def test_short_paragraphs_pack_into_one_chunk():
    assert chunk_text("one\n\ntwo\n\nthree") == ["one\n\ntwo\n\nthree"]


def test_paragraphs_are_not_split_when_they_fit():
    a, b = "a" * 700, "b" * 700
    assert chunk_text(f"{a}\n\n{b}", 1200) == [a, b]


def test_long_paragraph_splits_on_sentences():
    text = " ".join(f"Sentence number {i} ends here." for i in range(100))
    chunks = chunk_text(text, 200)
    assert all(len(c) <= 200 for c in chunks)
    assert all(c.endswith(".") for c in chunks)


def test_a_word_longer_than_the_limit_is_cut_hard():
    assert chunk_text("x" * 2500, 1200) == ["x" * 1200, "x" * 1200, "x" * 100]


def test_crlf_and_lf_give_the_same_chunks():
    assert chunk_text("a\r\n\r\nb") == chunk_text("a\n\nb")


@given(st.text(min_size=0, max_size=4000), st.integers(min_value=20, max_value=1500))
def test_chunks_are_bounded_deterministic_and_keep_every_word(text, limit):
    chunks = chunk_text(text, limit)
    assert chunks == chunk_text(text, limit)
    assert all(0 < len(c) <= limit for c in chunks)
    # every non-space character survives, in order
    kept = "".join("".join(chunks).split())
    original = "".join(text.replace("\r\n", "\n").replace("\r", "\n").split())
    assert kept == original


@given(
    st.lists(st.integers(min_value=1, max_value=400), min_size=1, max_size=60),
    st.integers(min_value=200, max_value=1500),
    st.integers(min_value=0, max_value=2**16),
)
def test_a_short_chunk_is_the_last_or_cannot_join_a_neighbour(lengths, limit, salt):
    """Short runs between anchors are merged (chunker.MIN_SEGMENT): a chunk shorter than that share of
    the window is the section's last, or starts or ends where the next block would not have fitted."""
    text = "\n\n".join(f"{salt}-{i} " + "w" * n for i, n in enumerate(lengths))
    chunks = chunk_text(text, limit)
    assert "".join("".join(chunks).split()) == "".join(text.split())
    assert chunker.MIN_SEGMENT == 1 / 4
    short = limit / 4
    for i, chunk in enumerate(chunks[:-1]):
        if len(chunk) >= short:
            continue
        before = i > 0 and len(chunks[i - 1]) + 2 + len(chunk) > limit
        after = len(chunk) + 2 + len(chunks[i + 1].split("\n\n")[0]) > limit
        assert before or after, (i, [len(c) for c in chunks])


def test_merging_short_runs_keeps_most_anchors():
    """A run of text is dropped only below a quarter window: chunks still end at anchors, not only when
    full (what keeps an edit's rewrites local)."""
    text = "\n\n".join(f"Paragraph {i}: " + "lantern quartz " * (i % 7 + 2) for i in range(200))
    chunks = chunk_text(text, 1200)
    assert sum(len(c) + 2 + len(n.split("\n\n")[0]) <= 1200 for c, n in itertools.pairwise(chunks)) >= len(chunks) // 2
