"""Value types of the read path."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result.

    ``score`` is cosine similarity (``1 - (a <=> b)``) for vector modes, the fused score for hybrid.
    ``vector`` is filled when the caller asked for vectors (MMR needs them). ``ranks`` holds each leg's
    1-based rank in hybrid mode (``{"fts": 3, "vector": None}``); ``scores`` each leg's raw score.
    After a cross-encoder rerank (``rerank="cross"``) ``score`` is still the first stage's, ``first_rank``
    the hit's 1-based first-stage rank and ``rerank_score`` the reranker's relevance score. ``cosine`` is
    a hybrid hit's cosine to the query as the search statement computed it (for either leg's hits; None
    in the other modes, whose vector-mode ``score`` is that cosine already).
    """

    chunk_id: str
    package_path: str
    score: float
    text: str
    vector: npt.NDArray[np.float32] | None = field(default=None, compare=False, repr=False)
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)
    ranks: dict[str, int | None] = field(default_factory=dict, compare=False)
    scores: dict[str, float | None] = field(default_factory=dict, compare=False)
    first_rank: int | None = field(default=None, compare=False)
    rerank_score: float | None = field(default=None, compare=False)
    cosine: float | None = field(default=None, compare=False)

    @property
    def citation(self) -> str:
        """``[package_path#chunk_id]``, the form a model is asked to cite; ``[chunk_id]`` when the id names
        its package already (a document's chunks are ``<package_path>#<n>``: ``[docs/fs.md#15]``)."""
        if self.chunk_id.startswith(f"{self.package_path}#"):
            return f"[{self.chunk_id}]"
        return f"[{self.package_path}#{self.chunk_id}]"
