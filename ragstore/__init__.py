"""ragstore: a retrieval store for RAG on PostgreSQL + pgvector."""

from ragstore.db.connection import connect
from ragstore.errors import (
    BackendError,
    Conflict,
    DatabaseUnavailable,
    InvalidInput,
    ModelMismatch,
    NotFound,
    PermissionDenied,
    RagstoreError,
    SchemaError,
    Timeout,
)
from ragstore.families import Family, create_family, get_family, list_families
from ragstore.ingest.records import ChunkRecord, IndexRow
from ragstore.ingest.run import index_sources
from ragstore.ingest.writer import IndexReport, write_records
from ragstore.search.types import Hit

__all__ = [
    "BackendError",
    "ChunkRecord",
    "Conflict",
    "DatabaseUnavailable",
    "Family",
    "Hit",
    "IndexReport",
    "IndexRow",
    "InvalidInput",
    "ModelMismatch",
    "NotFound",
    "PermissionDenied",
    "RagstoreError",
    "SchemaError",
    "Timeout",
    "connect",
    "create_family",
    "get_family",
    "index_sources",
    "list_families",
    "write_records",
]
