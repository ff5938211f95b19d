"""ragstore: a retrieval store for RAG on PostgreSQL + pgvector.

Applications start from :class:`ragstore.Store` (a pool of connections; thread-safe) or
:class:`ragstore.AsyncStore` (asyncio). The exceptions are imported with the package (they need only
the standard library); the other public names on first use (``ragstore.connect`` loads psycopg then), so
that importing a submodule such as the command line does not pay for the whole library.
``ragstore.connect(dsn)`` follows the Store's rule: the DSN given, else ``$RAGSTORE_DSN``, else
DatabaseUnavailable; it never starts the embedded server (``ragstore.embedded.start()`` does).

``ragstore.__version__`` is the installed distribution's version (``importlib.metadata``), the one
``pip show ragstore`` and ``ragstore --version`` print.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _distribution_version
from typing import TYPE_CHECKING, Any

from ragstore.errors import (
    BackendError,
    Conflict,
    DatabaseUnavailable,
    FingerprintVectorsWarning,
    InvalidInput,
    ModelMismatch,
    NotFound,
    PermissionDenied,
    RagstoreError,
    SchemaError,
    Timeout,
)

try:
    __version__: str = _distribution_version("ragstore")
except PackageNotFoundError:  # a source tree on sys.path that pip never installed
    __version__ = "0+unknown"

if TYPE_CHECKING:
    from ragstore.db.connection import connect_given as connect
    from ragstore.families import Family, create_family, get_family, list_families
    from ragstore.ingest.records import ChunkRecord, IndexRow
    from ragstore.ingest.run import index_sources, write_records
    from ragstore.ingest.writer import IndexReport
    from ragstore.search.api import search
    from ragstore.search.request import Hit
    from ragstore.store import Store
    from ragstore.store_async import AsyncStore

# public name -> the module that defines it
_LAZY: dict[str, str] = {
    "connect": "ragstore.db.connection",  # as connect_given (_RENAMED): the Store's rule, no server started
    "Family": "ragstore.families",
    "create_family": "ragstore.families",
    "get_family": "ragstore.families",
    "list_families": "ragstore.families",
    "ChunkRecord": "ragstore.ingest.records",
    "IndexRow": "ragstore.ingest.records",
    "index_sources": "ragstore.ingest.run",
    "IndexReport": "ragstore.ingest.writer",
    "write_records": "ragstore.ingest.run",
    "Hit": "ragstore.search.request",
    "search": "ragstore.search.api",
    "Store": "ragstore.store",
    "AsyncStore": "ragstore.store_async",
}
# public name -> its name in its module, where the two differ
_RENAMED: dict[str, str] = {"connect": "connect_given"}

__all__ = [
    "AsyncStore",
    "BackendError",
    "ChunkRecord",
    "Conflict",
    "DatabaseUnavailable",
    "Family",
    "FingerprintVectorsWarning",
    "Hit",
    "IndexReport",
    "IndexRow",
    "InvalidInput",
    "ModelMismatch",
    "NotFound",
    "PermissionDenied",
    "RagstoreError",
    "SchemaError",
    "Store",
    "Timeout",
    "connect",
    "create_family",
    "get_family",
    "index_sources",
    "list_families",
    "search",
    "write_records",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ragstore' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), _RENAMED.get(name, name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
