"""The ``external`` backend: a family whose vectors are computed outside ragstore.

It records the model's name and dimension (so that vectors or a caller-side model of another embedding
space are refused), and embeds nothing itself: such a family is written with records that carry their
``vector``, or through a caller-supplied backend of the same name, model and dimension (the framework
adapters in :mod:`ragstore.integrations` wrap the application's embedding model that way).
"""

from __future__ import annotations

from collections.abc import Sequence

from ragstore.embed.base import Matrix
from ragstore.errors import BackendError, InvalidInput

NAME = "external"


class ExternalBackend:
    """``name='external'``, the ``model`` and ``dim`` the vectors come from; :meth:`embed` refuses."""

    name = NAME

    def __init__(self, model: str, dim: int) -> None:
        if not isinstance(model, str) or not model.strip():
            raise InvalidInput("the external backend needs the name of the model that computes the vectors")
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise InvalidInput(f"the external backend needs the vectors' dimension (a positive integer), got {dim!r}")
        self.model = model
        self.dim = dim

    def embed(self, texts: Sequence[str]) -> Matrix:
        raise BackendError(
            f"the external backend ({self.model}, {self.dim}-d) computes no vectors: give each record its "
            "`vector`, or search and index through the application's model (e.g. the LangChain or "
            "LlamaIndex adapter)"
        )
