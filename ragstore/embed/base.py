"""The embedding port: every backend has a name, a model, a dimension and ``embed``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]


@runtime_checkable
class Backend(Protocol):
    """An embedding backend.

    ``embed`` returns a C-contiguous float32 array of shape ``[len(texts), dim]`` whose rows are in the
    order of ``texts``. It raises :class:`ragstore.errors.InvalidInput` for an empty text and
    :class:`ragstore.errors.BackendError` when the model or provider fails. Every backend that embeds text
    checks its input with :func:`ragstore.common.text.check_texts`.
    """

    @property
    def name(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Matrix: ...
