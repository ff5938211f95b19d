"""The ``offline`` backend: a deterministic 16-dimension fingerprint.

The algorithm is written out in docs/decisions.md, "The offline backend".

Hermetic, free and reproducible, and bit-identical to the SQL function ``ragstore.offline_embed``.
It is not a semantic embedding: texts that mean the same thing do not land near each other.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragstore.common.text import check_texts
from ragstore.embed.base import Matrix

DIM = 16
MODEL = "fingerprint-v1"
_SLOTS = np.arange(DIM, dtype=np.uint64)
_MULT = (0x01000193 + 2 * _SLOTS).astype(np.uint32)
_SEED = (((_SLOTS + 1) * 0x9E3779B1) % (1 << 32)).astype(np.uint32)
# Texts are embedded in groups of similar length so that padding costs little.
_GROUP = 4096


def fingerprint(texts: Sequence[str]) -> Matrix:
    """Embed ``texts`` with the fingerprint algorithm, vectorised over the batch.

    Raises InvalidInput as :func:`~ragstore.common.text.check_texts` does (one string, an empty text).
    """
    check_texts(texts)
    out = np.empty((len(texts), DIM), dtype=np.float32)
    if not texts:
        return out
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    order = np.argsort(lengths, kind="stable")
    for start in range(0, len(texts), _GROUP):
        idx = order[start : start + _GROUP]
        out[idx] = _fingerprint_group([texts[i] for i in idx], lengths[idx])
    return out


def _fingerprint_group(texts: list[str], lengths: np.ndarray) -> Matrix:
    width = int(lengths.max())
    codes = np.zeros((len(texts), width), dtype=np.uint32)
    for row, text in enumerate(texts):
        # UTF-32 gives code points, surrogates included, exactly as Python's ord() sees them.
        codes[row, : len(text)] = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    h = np.broadcast_to(_SEED, (len(texts), DIM)).copy()
    with np.errstate(over="ignore"):
        for i in range(width):
            live = lengths > i
            step = h * _MULT + (codes[:, i : i + 1] * np.uint32(i + 1))
            if live.all():
                h = step
            else:
                h[live] = step[live]
    return (h.astype(np.float64) / 2147483648.0 - 1.0).astype(np.float32)


class OfflineBackend:
    """The default backend: ``name='offline'``, ``model='fingerprint-v1'``, ``dim=16``."""

    name = "offline"
    model = MODEL
    dim = DIM

    def embed(self, texts: Sequence[str]) -> Matrix:
        return fingerprint(texts)
