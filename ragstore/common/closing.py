"""The ``with`` statement for objects that hold a resource until ``close()``."""

from __future__ import annotations

from typing import Self

__all__ = ["Closing"]


class Closing:
    """Mixin: ``with obj as o:`` gives ``obj`` itself and calls ``obj.close()`` when the block ends,
    however it ends (an exception goes on after the close). A subclass defines ``close``."""

    def close(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define close()")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
