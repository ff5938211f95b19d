"""The ``external`` backend: a family whose vectors are computed elsewhere and brought with the records.

It has a model name and a dimension (what the family records, so that a vector of another space is
refused) and embeds nothing: indexing it needs a ``vector`` on every record, and searching it a query
vector (``search(..., vector=...)``, or ``ragstore search FAMILY --vector-file FILE``). Full-text search
(``--mode fts``) needs no vector and works with a text query.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ragstore.embed.base import Matrix
from ragstore.errors import InvalidInput

NAME = "external"


@dataclass(frozen=True)
class ExternalBackend:
    """``name='external'``: vectors of ``model`` with ``dim`` dimensions, made outside ragstore."""

    model: str
    dim: int
    name: ClassVar[str] = NAME

    def __post_init__(self) -> None:
        if not self.model or not self.model.strip():
            raise InvalidInput("the external backend needs --model: the name of the model that made the vectors")
        if isinstance(self.dim, bool) or not isinstance(self.dim, int) or self.dim < 1:
            raise InvalidInput("the external backend needs --dimensions: the vectors' dimension (a positive integer)")

    def embed(self, texts: Sequence[str]) -> Matrix:
        raise InvalidInput(
            f"the external backend ({self.model}, {self.dim}-d) embeds no text: its vectors are made "
            "elsewhere; give a query vector (search(..., vector=...) or `ragstore search FAMILY --vector-file "
            "FILE`), use --mode fts for a text query, and give a vector with every record to index"
        )


# The largest query vector file read (bytes): a vector of pgvector's most dimensions, written as JSON or .npy,
# is well under it.
MAX_VECTOR_FILE_BYTES = 4 * 1024 * 1024
F32_MAX = float(np.finfo(np.float32).max)


def read_vector_file(path: str) -> Any:
    """The query vector in ``path``: a ``.npy`` array of numbers, or a JSON array of numbers. InvalidInput
    naming the file for anything else: not a regular file (a FIFO or a device is refused before any read),
    over :data:`MAX_VECTOR_FILE_BYTES`, a text, a boolean or a null among the values, a value beyond float32
    (``value 1e+39 at position 3 is beyond float32``). NotFound when it is missing. The dimension and
    finiteness are checked by the search against the family."""
    import io

    from ragstore.common.files import read_bytes
    from ragstore.common.strictjson import loads_strict

    data = read_bytes(path, "vector file", limit=MAX_VECTOR_FILE_BYTES + 1)
    if len(data) > MAX_VECTOR_FILE_BYTES:
        raise InvalidInput(
            f"{path}: over {MAX_VECTOR_FILE_BYTES // (1024 * 1024)} MB; a query vector file holds one array of numbers"
        )
    if path.lower().endswith(".npy"):
        try:
            array = np.load(io.BytesIO(data), allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise InvalidInput(f"{path}: not a NumPy .npy array of numbers: {exc}") from exc
        if not isinstance(array, np.ndarray) or array.dtype.kind not in "fiu":
            kind = array.dtype if isinstance(array, np.ndarray) else type(array).__name__
            raise InvalidInput(f"{path}: a .npy query vector holds numbers, this one holds {kind}")
        values = array.reshape(-1).tolist()
    else:
        value = loads_strict(data, path)
        if not isinstance(value, list):
            raise InvalidInput(f"{path}: expected a JSON array of numbers, got {type(value).__name__}")
        values = value
        array = value
    for position, item in enumerate(values):
        if isinstance(item, bool) or not isinstance(item, int | float):
            raise InvalidInput(f"{path}: value {item!r} at position {position} is not a number")
        if abs(item) > F32_MAX:
            shown = f"{item:g}" if isinstance(item, float) else f"an integer of {len(str(abs(item)))} digits"
            raise InvalidInput(f"{path}: value {shown} at position {position} is beyond float32")
    return array
