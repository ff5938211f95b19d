from hypothesis import given
from hypothesis import strategies as st

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
