"""Where a small first load spends its time: ``Store.index`` of benchmarks/peers.py's rows into an ``external``
family, timed by phase, beside the physical limit of the same rows, in one run.

    python benchmarks/first_load_phases.py                 # 30k x 384
    python benchmarks/first_load_phases.py --rows 100000

The rows are peers.py's (clustered 384-d vectors, metadata ``cat`` and ``grp``, ten rows per package),
given to ``Store.index`` as dicts as peers.py's ragstore worker gives them. The phases are timed around
ragstore's own functions (wrapped for this run): the pass (reading, checking, hashing, COPY and merge: the
rest of the load), ``cluster_by_package`` (CLUSTER and ANALYZE) and ``ensure_hnsw_index`` (the HNSW build,
with the memory and workers of ragstore/families/build_memory.py). The physical limit is peers.py's
(binary COPY of the same rows plus the same HNSW build). Without ``--dsn`` an embedded server runs in a
temporary folder. ``uptime`` is printed before and after.
"""

from __future__ import annotations

import argparse
import functools
import subprocess
import time
from typing import Any

from _db import admin_dsn, scratch_database
from peers import make_data, physical_limit_of

import ragstore.ingest.writer as writer
from ragstore import Store
from ragstore.embed.external import ExternalBackend

PHASES = ("cluster_by_package", "ensure_hnsw_index")


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def timed(seconds: dict[str, float], name: str) -> None:
    original = getattr(writer, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - started

    setattr(writer, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=30_000)
    parser.add_argument("--dsn")
    args = parser.parse_args()
    data = make_data(args.rows, 1, 384)
    rows = [
        {
            "chunk_id": f"r{i}",
            "package_path": f"doc{i // 10}",
            "text": f"row {i} of document {i // 10}",
            "metadata": {"cat": int(data["cat"][i]), "grp": int(data["grp"][i])},
            "vector": data["vectors"][i].tolist(),
        }
        for i in range(args.rows)
    ]
    seconds: dict[str, float] = {}
    for name in PHASES:
        timed(seconds, name)
    print("before:", uptime(), flush=True)
    with admin_dsn(args.dsn) as admin:
        limit = physical_limit_of(admin, data)
        with scratch_database(admin) as dsn, Store(dsn) as store:
            backend = ExternalBackend("peers-bench", 384)
            store.create_family("bench", backend)
            started = time.perf_counter()
            store.index(iter(rows), "bench", backend=backend)
            total = time.perf_counter() - started
    rest = total - sum(seconds.values())
    print(f"physical limit {limit:.2f} s; ragstore first load {total:.2f} s = {limit / total:.2f}x the limit")
    print(f"- pass (read, check, hash, COPY, merge): {rest:.2f} s ({rest / total:.0%})")
    for name in PHASES:
        print(f"- {name}: {seconds.get(name, 0.0):.2f} s ({seconds.get(name, 0.0) / total:.0%})")
    print("after:", uptime())


if __name__ == "__main__":
    main()
