import numpy as np
import pytest

from ragstore.embed.offline import DIM, OfflineBackend, fingerprint
from ragstore.errors import InvalidInput
from tests.strings import varied_strings


def reference(text: str) -> np.ndarray:
    """The fingerprint of docs/decisions.md ("The offline backend") written out literally, one character at a time."""
    out = []
    for s in range(DIM):
        mult = 0x01000193 + 2 * s
        h = ((s + 1) * 0x9E3779B1) % 2**32
        for i, ch in enumerate(text):
            h = (h * mult + ord(ch) * (i + 1)) % 2**32
        out.append(np.float32(h / 2**31 - 1.0))
    return np.array(out, dtype=np.float32)


def test_fingerprint_matches_the_spec_bit_for_bit():
    texts = varied_strings(300)
    got = fingerprint(texts)
    for text, row in zip(texts, got, strict=True):
        assert row.view(np.uint32).tolist() == reference(text).view(np.uint32).tolist(), repr(text[:40])


def test_batch_order_and_grouping_do_not_change_vectors():
    texts = varied_strings(50, seed=3)
    together = fingerprint(texts)
    alone = np.vstack([fingerprint([t]) for t in texts])
    assert np.array_equal(together.view(np.uint32), alone.view(np.uint32))


def test_known_value_for_hello():
    # Pinned so that a change of the algorithm cannot pass unnoticed.
    assert fingerprint(["hello"])[0][:3].tolist() == pytest.approx([0.36430264, 0.5133966, 0.5018979], abs=1e-7)


def test_values_are_in_minus_one_to_one():
    v = fingerprint(varied_strings(100))
    assert v.dtype == np.float32 and v.shape == (100, 16)
    assert (v >= -1).all() and (v < 1).all()


def test_empty_text_is_refused():
    with pytest.raises(InvalidInput, match="empty"):
        fingerprint(["ok", ""])


def test_one_string_is_refused_not_read_as_characters():
    with pytest.raises(InvalidInput, match="not one string"):
        fingerprint("hello")


def test_backend_port():
    backend = OfflineBackend()
    assert (backend.name, backend.model, backend.dim) == ("offline", "fingerprint-v1", 16)
    assert backend.embed([]).shape == (0, 16)
