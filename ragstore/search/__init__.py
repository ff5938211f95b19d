"""The read path: :func:`search` (HNSW, exact, full text, hybrid, MMR) and the :class:`Hit` it returns.

``ragstore.search`` is both this package and the function: importing a submodule sets the package as
the attribute ``search`` of ``ragstore``, so the package itself is callable and calls
:func:`ragstore.search.api.search`. ``ragstore.search(conn, family, ...)`` works whichever was loaded first.
"""

import sys
from types import ModuleType
from typing import Any

from ragstore.search.api import search
from ragstore.search.request import Hit

__all__ = ["Hit", "search"]


class _CallablePackage(ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return search(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
