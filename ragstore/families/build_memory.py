"""How much memory an HNSW build (or the CLUSTER before it) gets, and how many parallel workers: one rule.

pgvector builds the HNSW graph in ``maintenance_work_mem``; when the graph outgrows it, the build goes on
on disk, many times slower ("hnsw graph no longer fits into maintenance_work_mem"). A parallel build
reserves all of ``maintenance_work_mem`` as shared memory up front, so a size far above the need costs
memory the machine may not have (a container's ``/dev/shm``). The rule: what the work holds, with a
margin, never under :data:`FLOOR` nor under what keeps every parallel worker (:data:`PARTICIPANT_MEMORY`),
never over :data:`RAM_FRACTION` of the machine's memory nor over ``$RAGSTORE_BUILD_MEMORY`` (e.g. ``2GB``)
when set. Workers: one per core beyond the leader's, never fewer than the server's default
(:data:`SERVER_WORKERS`).

What the graph holds per row was measured on pgvector 0.8 at m 16 (benchmarks/README.md, "HNSW build
memory"): the indexed value (:func:`value_bytes`) plus :data:`GRAPH_BYTES` of neighbour lists and element
header, the same for every storage and dimension.
"""

from __future__ import annotations

import os

from ragstore.db.server import BUILD_MEMORY_ENV, machine_memory, size_from_env

_MB = 1024 * 1024
# Bytes per element beyond its value (m 16: 2m level-0 neighbours of 16 bytes, upper layers, header):
# 706-712 measured at 384-d and 768-d for vector, halfvec and bit, rounded up.
GRAPH_BYTES = 720
# Headroom over the estimate (allocation rounding, upper layers of unlucky rows).
MARGIN = 1.25
FLOOR = 64 * _MB
RAM_FRACTION = 4  # at most a quarter of the machine's memory
# PostgreSQL's own bound on a parallel build (max_worker_processes and max_parallel_workers default to 8).
MAX_WORKERS = 7
# PostgreSQL's default max_parallel_maintenance_workers. On 2 cores, two workers beside the leader built a
# 30k x 384 graph faster than one in every pair of a same-run comparison on a shared machine
# (benchmarks/README.md, "HNSW build memory"; docs/decisions.md, "Build workers").
SERVER_WORKERS = 2
# PostgreSQL launches a parallel build's workers only while maintenance_work_mem gives each participant (the
# leader too) at least 32MB, and drops workers silently below that (plan_create_index_workers).
PARTICIPANT_MEMORY = 32 * _MB


def value_bytes(storage: str, vector_type: str, dim: int) -> int:
    """Bytes of one indexed value as the graph keeps it: pgvector's varlena (an 8-byte header, then 4 bytes a
    dimension for vector, 2 for halfvec, a bit for bit)."""
    if storage == "bit":
        return 8 + (dim + 7) // 8
    if storage == "halfvec" or vector_type == "halfvec":
        return 8 + 2 * dim
    return 8 + 4 * dim


def hnsw_need(rows: int, storage: str, vector_type: str, dim: int) -> int:
    """Bytes the whole graph of ``rows`` rows holds while it is built in memory (m 16)."""
    return max(0, rows) * (value_bytes(storage, vector_type, dim) + GRAPH_BYTES)


def build_cap() -> int:
    """The most one build may take: ``$RAGSTORE_BUILD_MEMORY`` when set, else a quarter of the machine's
    memory (RAM, or the cgroup's limit when lower)."""
    return size_from_env(BUILD_MEMORY_ENV) or machine_memory() // RAM_FRACTION


def maintenance_bytes(need: int, cap: int | None = None, workers: int = 0) -> int:
    """``maintenance_work_mem`` in bytes for work that holds ``need`` bytes done by the leader and ``workers``
    parallel workers: the need with :data:`MARGIN`, at least :data:`FLOOR` and :data:`PARTICIPANT_MEMORY`
    for each participant, at most ``cap`` (:func:`build_cap` when None; a cap below either wins)."""
    limit = build_cap() if cap is None else cap
    return min(limit, max(FLOOR, int(need * MARGIN), PARTICIPANT_MEMORY * (workers + 1)))


def setting(size: int) -> str:
    """``size`` bytes in PostgreSQL's units (kB, at least 1MB: the server's minimum)."""
    return f"{max(1024, size // 1024)}kB"


def parallel_workers() -> int:
    """``max_parallel_maintenance_workers`` for a build: one per core beyond the leader's (the leader builds
    too), never fewer than :data:`SERVER_WORKERS`, never more than :data:`MAX_WORKERS`."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return min(MAX_WORKERS, max(SERVER_WORKERS, cores - 1))
