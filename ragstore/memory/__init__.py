"""Agent memory: five append-only stores, composition by recency, and binding by absence (SPEC 7).

``load_profile`` reads which stores an agent declares; ``bind`` gives readers to those stores only;
``compose_memory`` turns what the readers return into a deterministic :class:`Bundle`.
"""

from ragstore.memory.binding import Binding, FunctionReader, Reader, ReaderFactory, ReadRequest, bind
from ragstore.memory.bundle import Bundle, ReadFailure, Rejection, canonical_json
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

__all__ = [
    "ALL_STORES",
    "DEFAULT_POLICY",
    "AgentProfile",
    "Binding",
    "Bundle",
    "CompositionPolicy",
    "FunctionReader",
    "MemoryRecord",
    "ReadFailure",
    "ReadRequest",
    "Reader",
    "ReaderFactory",
    "Rejection",
    "Store",
    "StoreName",
    "StorePolicy",
    "bind",
    "canonical_json",
    "compose_memory",
    "load_profile",
]
