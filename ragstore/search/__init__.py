"""The read path: :func:`search` (HNSW, exact, full text, hybrid, MMR) and the :class:`Hit` it returns."""

from ragstore.search.api import search
from ragstore.search.types import Hit

__all__ = ["Hit", "search"]
