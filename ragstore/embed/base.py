"""The embedding port: every backend has a name, a model, a dimension and ``embed``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ragstore.errors import InvalidInput

Matrix = npt.NDArray[np.float32]


@runtime_checkable
class Backend(Protocol):
    """An embedding backend.

    ``embed`` returns a C-contiguous float32 array of shape ``[len(texts), dim]`` whose rows are in the
    order of ``texts``. It raises :class:`ragstore.errors.InvalidInput` for an empty text and
    :class:`ragstore.errors.BackendError` when the model or provider fails.
    """

    @property
    def name(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Matrix: ...


def check_texts(texts: Sequence[str]) -> None:
    """The input contract of ``embed``: a sequence (not one string) of non-empty strings.

    Raises InvalidInput naming the first offending text's position.
    """
    if isinstance(texts, str):
        raise InvalidInput("embed takes a sequence of texts, not one string")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InvalidInput(f"text #{i} is {type(text).__name__}, not str")
        if not text:
            raise InvalidInput(f"text #{i} is empty: empty text is never embedded")
