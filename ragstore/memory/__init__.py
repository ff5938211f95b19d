"""Agent memory: five append-only stores, composition by recency, and binding by absence.

``load_profile`` reads which stores an agent declares; ``bind`` gives readers to those stores only;
``compose_memory`` turns what the readers return into a deterministic :class:`Bundle`.
Postgres: ``add_records``/``import_jsonl`` write (append-only), ``compose_from_db`` composes from the
stored records, ``recall`` ranks them by meaning, ``forget`` is the logged erasure.
"""

from ragstore.memory.binding import Binding, FunctionReader, Reader, ReaderFactory, ReadRequest, bind
from ragstore.memory.bundle import Bundle, ReadFailure, Rejection, canonical_bytes, canonical_json
from ragstore.memory.compose import compose_memory
from ragstore.memory.models import (
    ALL_STORES,
    DEFAULT_POLICY,
    AgentProfile,
    CompositionPolicy,
    MemoryRecord,
    Store,
    StoreName,
    StorePolicy,
    load_profile,
)
from ragstore.memory.principals import Principal, grant_agent, list_principals, revoke_agent
from ragstore.memory.recall import RecallHit, RecallResult, embed_pending, recall
from ragstore.memory.store import (
    AddResult,
    ForgetResult,
    PostgresReader,
    add_records,
    compose_from_db,
    forget,
    import_jsonl,
    memory_layers,
    postgres_binding,
)

__all__ = [
    "ALL_STORES",
    "DEFAULT_POLICY",
    "AddResult",
    "AgentProfile",
    "Binding",
    "Bundle",
    "CompositionPolicy",
    "ForgetResult",
    "FunctionReader",
    "MemoryRecord",
    "PostgresReader",
    "Principal",
    "ReadFailure",
    "ReadRequest",
    "Reader",
    "ReaderFactory",
    "RecallHit",
    "RecallResult",
    "Rejection",
    "Store",
    "StoreName",
    "StorePolicy",
    "add_records",
    "bind",
    "canonical_bytes",
    "canonical_json",
    "compose_from_db",
    "compose_memory",
    "embed_pending",
    "forget",
    "grant_agent",
    "import_jsonl",
    "list_principals",
    "load_profile",
    "memory_layers",
    "postgres_binding",
    "recall",
    "revoke_agent",
]
