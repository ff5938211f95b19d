"""A million vectors on one node, end to end in one run: first load against the physical limit, the
unchanged re-run, peak memory and disk, then unfiltered and filtered searches.

    nice -n 19 python benchmarks/million.py --home $RAGSTORE_HOME                   # 1,000,000 x 384
    nice -n 19 python benchmarks/million.py --home $RAGSTORE_HOME --searches-only   # again, on the kept load
    python benchmarks/million.py --rows 20000 --queries 50                          # a quick run

Data (written before the clock starts): ROWS clustered unit vectors (benchmarks/query.py's 100 Gaussian
clusters, noise 0.35, drawn block by block from one seed), ids ``c0000000``..., benchmarks/query.py's nested
package paths (one prefix keeps 0.1%, 1% or 10% of the rows) and metadata ``{"tag": 1% of the rows, "d":
i % 10, "h": i % 2, "k": i % 1000}``, as one Parquet file (fixed-size-list vector column, metadata as a JSON
string). Queries are fresh points of the same clusters.

In one run, on the server of ``--home`` (an embedded server, started if it is not running), in database
``--database`` (kept afterwards, so ``--searches-only`` can search the same load again):

* ``ragstore index FAMILY FILE.parquet`` as a child process, into an empty ``external`` family (read,
  validate, hash, COPY, merge, commit, cluster, HNSW build: all on the clock), then the same command again
  (unchanged re-run);
* peak RSS: of the ``ragstore index`` process, and of the building backend and its parallel workers
  (``VmHWM``: shared memory they touched included, so the graph a parallel build keeps in shared memory
  counts in each), sampled from /proc every 0.25 s; disk: the database, the family table and its index;
* searches through ``ragstore.search.api.run_vector`` (the path of ``ragstore search``), k 10, the default
  ef_search, unfiltered and at 0.1%, 1%, 10% (package and metadata filters) and 50% (metadata), all cases
  interleaved query by query: the plan chosen from the planner's estimate, recall@10 against numpy's exact
  top 10 of the rows the filter keeps, the fewest hits, p50/p95, and p50 over the unfiltered p50;
* then the physical limit, in a scratch database of the same server (``--limit-only``: just this): binary
  COPY of the same rows (hashes precomputed off the clock) into ``ragstore.chunks`` and the table of an
  empty family (ragstore's own tables: same columns, keys, indexes and foreign key, its HNSW index
  dropped), then ``families.tables.ensure_hnsw_index``: the build ragstore runs, with the same m, ef_construction,
  maintenance_work_mem and parallel workers (``ragstore/families/build_memory.py``); cancelled after
  ``--limit-timeout`` seconds.

Every figure is from one run on one machine: compare the ratios, not the absolute seconds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
from _db import scratch_database
from pgvector import Vector
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.types.json import Jsonb
from query import FILTERS, interleaved, package_of, tag_of, truth

from ragstore import families, migrate
from ragstore.db.connection import connect
from ragstore.db.server import EmbeddedServer
from ragstore.embed.external import ExternalBackend
from ragstore.errors import NotFound, RagstoreError
from ragstore.families import tables
from ragstore.search import vector as vec
from ragstore.search.api import run_vector
from ragstore.search.request import DEFAULT_EF_SEARCH, make_filter

K = 10
BLOCK = 100_000
FAMILY, LIMIT_FAMILY = "vec", "limit"


def meta_of(i: int) -> dict[str, object]:
    """Row i's metadata: a 1% tag, ``d`` (10%), ``h`` (50%) and ``k`` (0.1%)."""
    return {"tag": tag_of(i), "d": i % 10, "h": i % 2, "k": i % 1000}


# The searched cases: (label, package prefix, metadata, the rows it keeps).
CASES: list[tuple[str, str | None, dict[str, object] | None, Callable[[int], bool] | None]] = [
    ("unfiltered", None, None, None),
    ("package 0.1%", FILTERS["0.1%"], None, lambda i: package_of(i).startswith(FILTERS["0.1%"])),
    ("package 1%", FILTERS["1%"], None, lambda i: package_of(i).startswith(FILTERS["1%"])),
    ("package 10%", FILTERS["10%"], None, lambda i: package_of(i).startswith(FILTERS["10%"])),
    ("metadata 0.1%", None, {"k": 7}, lambda i: i % 1000 == 7),
    ("metadata 1%", None, {"tag": "t3"}, lambda i: tag_of(i) == "t3"),
    ("metadata 10%", None, {"d": 3}, lambda i: i % 10 == 3),
    ("metadata 50%", None, {"h": 1}, lambda i: i % 2 == 1),
]


def make_vectors(n: int, dim: int, queries: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Clustered unit vectors (query.py's clusters), drawn block by block so 1M x 384 stays in float32."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(100, dim)).astype(np.float32)
    data = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, BLOCK):
        count = min(BLOCK, n - start)
        block = centers[rng.integers(0, 100, count)] + 0.35 * rng.normal(size=(count, dim)).astype(np.float32)
        data[start : start + count] = block / np.linalg.norm(block, axis=1, keepdims=True)
    qs = centers[rng.integers(0, 100, queries)] + 0.35 * rng.normal(size=(queries, dim)).astype(np.float32)
    return data, qs.astype(np.float32)


def write_parquet(path: Path, data: np.ndarray) -> None:
    n, dim = data.shape
    schema = pa.schema(
        [
            ("chunk_id", pa.string()),
            ("package_path", pa.string()),
            ("text", pa.string()),
            ("metadata", pa.string()),
            ("vector", pa.list_(pa.float32(), dim)),
        ]
    )
    with pq.ParquetWriter(path, schema) as out:
        for start in range(0, n, 50_000):
            rows = range(start, min(n, start + 50_000))
            flat = pa.array(data[start : rows.stop].reshape(-1), type=pa.float32())
            out.write_table(
                pa.table(
                    {
                        "chunk_id": [f"c{i:07d}" for i in rows],
                        "package_path": [package_of(i) for i in rows],
                        "text": [f"chunk {i}" for i in rows],
                        "metadata": [json.dumps(meta_of(i)) for i in rows],
                        "vector": pa.FixedSizeListArray.from_arrays(flat, dim),
                    },
                    schema=schema,
                )
            )


class Peaks:
    """Peak ``VmHWM`` of processes sampled from /proc every 0.25 s in a thread: ``pids()`` names them by role
    each time (it may change: a build's backend and its parallel workers appear and go)."""

    def __init__(self, pids: Callable[[], dict[str, list[int]]]) -> None:
        self.pids, self.peak_kb, self.seen = pids, dict[str, int](), dict[str, set[int]]()
        self.started_at: dict[str, float] = {}
        self._stop = threading.Event()
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            try:
                roles = self.pids()
            except psycopg.Error:
                continue
            for role, pids in roles.items():
                self.started_at.setdefault(role, time.perf_counter() - self._t0)
                for pid in pids:
                    self.seen.setdefault(role, set()).add(pid)
                    kb = status_kb(pid, "VmHWM:")
                    self.peak_kb[role] = max(self.peak_kb.get(role, 0), kb)

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join()
        return {
            role: {"peak_mb": kb / 1024, "processes": len(self.seen[role]), "first_seen_s": self.started_at[role]}
            for role, kb in self.peak_kb.items()
        }


def status_kb(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def build_pids(watch: psycopg.Connection[Any], leader: int | None = None) -> dict[str, list[int]]:
    """The backend building an index in this database (or ``leader``) and its parallel workers."""
    if leader is None:
        row = watch.execute(
            "SELECT pid FROM pg_stat_progress_create_index WHERE datname = current_database()"
        ).fetchone()
        if not row:
            return {}
        leader = int(row[0])
    workers = [r[0] for r in watch.execute("SELECT pid FROM pg_stat_activity WHERE leader_pid = %s", (leader,))]
    return {"build backend": [leader], **({"build workers": workers} if workers else {})}


def physical_limit(dsn: str, data: np.ndarray, timeout: float) -> dict[str, Any]:
    """Binary COPY of the rows into ragstore's own tables of an empty family, then ragstore's HNSW build,
    cancelled when the whole exceeds ``timeout`` seconds (then ``build_s`` is None and ``build_progress``
    the share of the table's blocks the build had read)."""
    n, dim = data.shape
    zero = b"\0" * 32
    content = [hashlib.sha256(f"chunk {i}".encode()).digest() for i in range(n)]
    metas = [Jsonb(meta_of(i)) for i in range(n)]
    packages = [package_of(i) for i in range(n)]
    with connect(dsn) as conn:
        fam = families.create_family(conn, LIMIT_FAMILY, ExternalBackend("bench", dim), options={"dimensions": dim})
        tables.drop_hnsw_index(conn, fam)
        conn.commit()
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
        started = time.perf_counter()
        with conn.cursor() as cur:
            with cur.copy(
                "COPY ragstore.chunks (family, chunk_id, package_path, text, content_sha256, record_sha256,"
                " source_sha256, metadata) FROM STDIN (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["text", "text", "text", "text", "bytea", "bytea", "bytea", "jsonb"])
                for i in range(n):
                    copy.write_row(
                        (LIMIT_FAMILY, f"c{i:07d}", packages[i], f"chunk {i}", content[i], zero, zero, metas[i])
                    )
            with cur.copy(
                sql.SQL(
                    "COPY ragstore.{} (chunk_id, package_path, embedding, model, content_sha256, metadata)"
                    " FROM STDIN (FORMAT BINARY)"
                ).format(sql.Identifier(fam.table))
            ) as copy:
                copy.set_types(["text", "text", "vector", "text", "bytea", "jsonb"])
                for i in range(n):
                    copy.write_row((f"c{i:07d}", packages[i], Vector(data[i]), fam.model, content[i], metas[i]))
        conn.commit()
        copied = time.perf_counter() - started
        progress: list[float] = []
        with connect(dsn, autocommit=True) as watch:
            peaks = Peaks(lambda: build_pids(watch, backend))
            settings = tables.build_settings(conn, fam)
            built_at = time.perf_counter()
            timer = threading.Timer(max(0.0, timeout - (built_at - started)), cancel, (dsn, backend, progress))
            timer.start()
            try:
                tables.ensure_hnsw_index(conn, fam)
                conn.commit()
            except (RagstoreError, psycopg.Error):
                conn.rollback()
            timer.cancel()
            ended = time.perf_counter()
            rss = peaks.stop()
        index_bytes = None
        if not progress:
            index_bytes = conn.execute(
                "SELECT pg_relation_size(%s::regclass)", (f"ragstore.{fam.hnsw_index}",)
            ).fetchone()
        families.drop_family(conn, LIMIT_FAMILY)
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ragstore.chunks")
    return {
        "copy_s": copied,
        "build_s": None if progress else ended - built_at,
        "total_s": None if progress else ended - started,
        "cancelled_after_s": ended - started if progress else None,
        "build_progress": progress[0] if progress else None,
        "build_settings": settings,
        "index_mb": (index_bytes[0] if index_bytes else 0) / 2**20,
        "peak_rss": rss,
    }


def cancel(dsn: str, backend: int, progress: list[float]) -> None:
    """Note how far the build of ``backend`` got (blocks read / blocks), then cancel it."""
    with connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT blocks_done::float8 / nullif(blocks_total, 0) FROM pg_stat_progress_create_index WHERE pid = %s",
            (backend,),
        ).fetchone()
        progress.append(float(row[0]) if row and row[0] is not None else 0.0)
        conn.execute("SELECT pg_cancel_backend(%s)", (backend,))


def ragstore_index(dsn: str, home: Path, parquet: Path) -> tuple[float, dict[str, Any], int]:
    """``ragstore index FAMILY parquet`` as a child: (seconds, peak RSS by role, return code)."""
    env = dict(os.environ, RAGSTORE_HOME=str(home))
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "ragstore.cli", "--dsn", dsn, "index", FAMILY, str(parquet)],
        env=env,
        stdout=subprocess.DEVNULL,
    )
    with connect(dsn, autocommit=True) as watch:
        peaks = Peaks(lambda: {"ragstore index": [child.pid], **build_pids(watch)})
        child.wait()
        elapsed = time.perf_counter() - started
        rss = peaks.stop()
    return elapsed, rss, child.returncode


def disk(dsn: str) -> dict[str, float]:
    with connect(dsn) as conn:
        fam = families.get_family(conn, FAMILY)
        row = conn.execute(
            "SELECT pg_database_size(current_database()), pg_total_relation_size(%(t)s::regclass),"
            " pg_table_size(%(t)s::regclass), pg_relation_size(%(i)s::regclass),"
            " pg_total_relation_size('ragstore.chunks'::regclass)",
            {"t": f"ragstore.{fam.table}", "i": f"ragstore.{fam.hnsw_index}"},
        ).fetchone()
    assert row is not None
    names = ("database", "family table with indexes", "family table heap", "HNSW index", "chunks with indexes")
    return {name: value / 2**20 for name, value in zip(names, row, strict=True)}


def searches(dsn: str, data: np.ndarray, qs: np.ndarray, ef_search: int | None = None) -> list[dict[str, Any]]:
    """Every case of :data:`CASES`, interleaved query by query (see the module docstring); ``ef_search``
    None is the search's default."""
    n = len(data)
    ids = np.arange(n)
    wants = []
    for _, _, _, keep in CASES:
        mask = None if keep is None else np.fromiter((keep(int(i)) for i in ids), dtype=bool, count=n)
        wants.append(truth(data, qs, mask))
    out = []
    with connect(dsn, autocommit=True) as conn:
        fam = families.get_family(conn, FAMILY)
        fns, plans = [], []
        for _, package, metadata, _ in CASES:
            flt = make_filter(package, metadata)
            fns.append(
                lambda q, flt=flt: [
                    h.chunk_id for h in run_vector(conn, fam, q, k=K, flt=flt, ef_search=ef_search, vectors=False)
                ]
            )
            plans.append(vec.plan_for(conn, fam, flt))
            estimate = vec.estimate_rows(conn, fam, flt) if flt.active else None
            out.append({"plan": plans[-1], "estimated_rows": None if estimate is None else estimate.rows})
        load_before = os.getloadavg()
        results = interleaved(fns, qs)
        load_after = os.getloadavg()
    base = float(np.percentile(results[0][1], 50))
    for entry, (label, *_), (found, times), want in zip(out, CASES, results, wants, strict=True):
        rec = np.mean([len(set(f) & {f"c{i:07d}" for i in w}) / K for f, w in zip(found, want, strict=True)])
        p50 = float(np.percentile(times, 50))
        entry.update(
            label=label,
            recall=float(rec),
            fewest=min(len(f) for f in found),
            p50_ms=p50,
            p95_ms=float(np.percentile(times, 95)),
            x_unfiltered=p50 / base,
            load=[load_before[0], load_after[0]],
        )
    return out


def database(home: Path, name: str) -> str:
    """The DSN of database ``name`` on the embedded server of ``home`` (started, the database created and
    migrated when missing)."""
    server = EmbeddedServer(home)
    server.ensure_running()
    with psycopg.connect(server.dsn("postgres"), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(sql.SQL("CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE template0").format(sql.Identifier(name)))
    dsn = make_conninfo(server.dsn("postgres"), dbname=name)
    migrate.upgrade(dsn)
    return dsn


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def load_run(dsn: str, home: Path, data: np.ndarray, folder: Path) -> dict[str, Any]:
    dim = data.shape[1]
    parquet = folder / "million.parquet"
    write_parquet(parquet, data)
    out: dict[str, Any] = {"parquet_mb": parquet.stat().st_size / 2**20}
    print(f"  Parquet {out['parquet_mb']:.0f} MiB written ({uptime()})", flush=True)
    with connect(dsn) as conn:
        try:
            families.get_family(conn, FAMILY)
            raise SystemExit(f"family {FAMILY!r} exists in this database: drop it, or use --searches-only")
        except NotFound:
            pass
    with connect(dsn) as conn:
        families.create_family(conn, FAMILY, ExternalBackend("bench", dim), options={"dimensions": dim})
    first_s, rss, code = ragstore_index(dsn, home, parquet)
    assert code == 0, code
    with connect(dsn) as conn:
        settings = tables.build_settings(conn, families.get_family(conn, FAMILY))
    out["first"] = {"seconds": first_s, "peak_rss": rss, "build_settings": settings}
    print(f"  first load {json.dumps(out['first'])} ({uptime()})", flush=True)
    out["disk_mb"] = disk(dsn)
    print(f"  disk {json.dumps(out['disk_mb'])}", flush=True)
    again_s, _, code = ragstore_index(dsn, home, parquet)
    assert code == 0, code
    out["rerun_s"] = again_s
    print(f"  unchanged re-run {again_s:.1f}s ({uptime()})", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--home", type=Path, default=None, help="ragstore home of the server (default: a temporary one)"
    )
    parser.add_argument("--database", default="million", help="the database the run loads and keeps")
    parser.add_argument("--ef-search", type=int, default=None, help="hnsw.ef_search (default: the search's)")
    parser.add_argument("--searches-only", action="store_true", help="only the searches, on the kept load")
    parser.add_argument("--limit-only", action="store_true", help="only the physical limit (a database of its own)")
    parser.add_argument(
        "--limit-timeout", type=float, default=7200, help="cancel the physical limit after S s (0: do not measure it)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    ef = args.ef_search or DEFAULT_EF_SEARCH
    print(f"{uptime()}; {args.rows:,} x {args.dim}, {args.queries} queries, k {K}, ef_search {ef}")
    data, qs = make_vectors(args.rows, args.dim, args.queries)
    results: dict[str, Any] = {"rows": args.rows, "dim": args.dim, "start": uptime()}
    with tempfile.TemporaryDirectory(prefix="ragstore-bench-") as folder:
        home = args.home or Path(folder) / "home"
        dsn = database(home, args.database)
        if not (args.searches_only or args.limit_only):
            results["load"] = load_run(dsn, home, data, Path(folder))
            save(args.json, results)
        if not args.limit_only:
            results["searches"] = searches(dsn, data, qs, args.ef_search)
            save(args.json, results)
            print_searches(results["searches"])
        if args.limit_only or (not args.searches_only and args.limit_timeout > 0):
            # In a database of its own on the same server: empty tables, as the first load found them.
            with scratch_database(make_conninfo(dsn, dbname="postgres")) as scratch:
                limit = physical_limit(scratch, data, args.limit_timeout)
            results.setdefault("load", {})["limit"] = limit
            print(f"  physical limit {json.dumps(limit)} ({uptime()})", flush=True)
        if args.home is None:
            EmbeddedServer(home).stop()
    results["end"] = uptime()
    if "first" in results.get("load", {}) and "limit" in results["load"]:
        load = results["load"]
        limit, first = load["limit"], load["first"]["seconds"]
        if limit["total_s"] is not None:
            print(
                f"  first load {first:.1f}s = {limit['total_s'] / first:.2f}x the physical limit"
                f" ({limit['total_s']:.1f}s: COPY {limit['copy_s']:.1f}s + build {limit['build_s']:.1f}s)"
            )
        else:
            print(
                f"  first load {first:.1f}s; physical limit not measured: COPY {limit['copy_s']:.1f}s, build"
                f" cancelled at {limit['build_progress']:.0%} of its blocks after {limit['cancelled_after_s']:.0f}s"
            )
        print(f"  unchanged re-run {load['rerun_s']:.1f}s = {first / load['rerun_s']:.1f}x faster")
    print(results["end"])
    save(args.json, results)


def save(path: Path | None, results: dict[str, Any]) -> None:
    if path:
        path.write_text(json.dumps(results, indent=2))


def print_searches(rows: list[dict[str, Any]]) -> None:
    head = ("filter", "plan", "estimate", "recall@10", "fewest", "p50", "p95", "x unf.")
    print("  {:<14} {:<15} {:>9} {:>9} {:>6} {:>9} {:>9} {:>6}".format(*head))
    for s in rows:
        estimate = "" if s["estimated_rows"] is None else f"{s['estimated_rows']:,.0f}"
        print(
            f"  {s['label']:<14} {s['plan']:<15} {estimate:>9} {s['recall']:9.3f} {s['fewest']:6d}"
            f" {s['p50_ms']:6.2f} ms {s['p95_ms']:6.2f} ms {s['x_unfiltered']:6.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
