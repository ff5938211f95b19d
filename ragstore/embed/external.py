"""The ``external`` backend: a family whose vectors are computed elsewhere and brought with the records.

It has a model name and a dimension (what the family records, so that a vector of another space is
refused) and embeds nothing: indexing it needs a ``vector`` on every record, and searching it a query
vector (``search(..., vector=...)``, or ``ragstore search FAMILY --vector-file FILE``). Full-text search
(``--mode fts``) needs no vector and works with a text query.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
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


def read_vector_file(path: str) -> Any:
    """The query vector in ``path``: a ``.npy`` array, or a JSON array of numbers (InvalidInput naming it).
    The dimension and finiteness are checked by the search against the family."""
    from ragstore.common.strictjson import loads_strict

    try:
        if path.lower().endswith(".npy"):
            try:
                return np.load(path, allow_pickle=False)
            except ValueError as exc:
                raise InvalidInput(f"{path}: not a NumPy .npy array of numbers: {exc}") from exc
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot read: {exc.strerror or exc}") from exc
    value = loads_strict(data, path)
    if not isinstance(value, list):
        raise InvalidInput(f"{path}: expected a JSON array of numbers, got {type(value).__name__}")
    return value
