"""Precomputed-vector ingest (JSONL and Parquet) against the physical limit, measured in one run.

For each SIZE:DIM (default 100000:384):

* data: SIZE records with random 32-hex ids, short texts, 100 packages and a float32 vector each,
  written once as a JSONL file (``"vector"`` on every line) and as a Parquet file (fixed-size-list vector
  column), outside the clock. ``--vectors clustered`` (the default) draws each vector around one of 100
  centres (noise 0.5 of a centre's scale), as real embeddings cluster by topic, so HNSW recall@10 is about
  0.99 and a change in it means something; ``--vectors gaussian`` draws independent normal vectors (the
  hardest case for HNSW: recall@10 about 0.38 at 384-d, where a 0.005 change is within the noise);
* physical limit: binary COPY of the same rows (hashes and vectors precomputed off the clock) into tables
  built ``LIKE`` ragstore's chunk table and the family table (same columns, keys, indexes, foreign key),
  then the HNSW build with ragstore's m, ef_construction, maintenance_work_mem and parallel workers
  (ragstore/families/build_memory.py); measured three times, before the first loads
  and right after each of them (with its unchanged re-run and recall), since the shared machine's speed
  drifts by tens of percent over minutes: each first load is compared with the mean of the two limits
  measured around it;
* for each input (JSONL, Parquet), into its own ``external`` family: ``index_sources`` first load (read,
  parse, validate, hash, lookup, COPY, merge, commits, HNSW build: all on the clock), an unchanged re-run,
  then three rounds that each change another 1% of the records (text and vector) and re-run both inputs;
  HNSW recall@10 (ef_search 100, 500 queries against the numpy truth) before the first round, after it
  (the bar) and after the last.

Prints seconds and the ratios: physical limit / first load (bar >= 0.7), first / unchanged re-run
(bar >= 10), first / 1%-changed re-run (bar >= 8: the median of the three rounds, each also printed),
recall before and after (bar: within 0.005). Also the peak RSS of a ``ragstore index`` process loading the
Parquet file (``--rss``). Uses $RAGSTORE_DSN if set, else a throwaway embedded server.

    python benchmarks/ingest_precomputed.py --cases 100000:384
    python benchmarks/ingest_precomputed.py --cases 100000:384,1000000:16 --rss
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from _db import admin_dsn, scratch_database

from ragstore.db.connection import connect
from ragstore.db.sqlfiles import query
from ragstore.embed.external import ExternalBackend
from ragstore.families import HNSW_EF_CONSTRUCTION, HNSW_M, build_memory, create_family
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources

WORDS = "vector index query table chunk model store search recall token embed cosine graph layer".split()


VECTORS = ("clustered", "gaussian")


class Data:
    def __init__(self, n: int, dim: int, seed: int = 1, vectors: str = "clustered") -> None:
        rng = np.random.default_rng(seed)
        self.n, self.dim = n, dim
        self.centres = rng.standard_normal((100, dim)).astype(np.float32) if vectors == "clustered" else None
        self.ids = [rng.bytes(16).hex() for _ in range(n)]
        self.packages = [f"pkg/{i % 100:02d}" for i in range(n)]
        words = np.asarray(WORDS)
        picks = rng.integers(0, len(WORDS), size=(n, 6))
        self.texts = [" ".join(words[row]) + f" {i}" for i, row in enumerate(picks)]
        self.vectors = self.draw(rng, n)

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        noise = rng.standard_normal((count, self.dim)).astype(np.float32)
        if self.centres is None:
            return noise
        return (self.centres[rng.integers(0, len(self.centres), count)] + 0.5 * noise).astype(np.float32)

    def change(self, fraction: float, seed: int = 2) -> np.ndarray:
        rng = np.random.default_rng(seed)
        rows = rng.choice(self.n, size=max(1, int(self.n * fraction)), replace=False)
        for i in rows:
            self.texts[i] = self.texts[i] + " changed"
        self.vectors[rows] = self.draw(rng, len(rows))
        return rows

    def write_jsonl(self, path: Path) -> None:
        with path.open("wb") as out:
            for i in range(self.n):
                record = {"chunk_id": self.ids[i], "package_path": self.packages[i], "text": self.texts[i]}
                line = (
                    orjson.dumps(record)[:-1]
                    + b',"vector":'
                    + orjson.dumps(self.vectors[i], option=orjson.OPT_SERIALIZE_NUMPY)
                )
                out.write(line + b"}\n")

    def write_parquet(self, path: Path) -> None:
        flat = pa.array(self.vectors.reshape(-1), type=pa.float32())
        table = pa.table(
            {
                "chunk_id": pa.array(self.ids),
                "package_path": pa.array(self.packages),
                "text": pa.array(self.texts),
                "vector": pa.FixedSizeListArray.from_arrays(flat, self.dim),
            }
        )
        pq.write_table(table, path, row_group_size=50_000)


def build_settings(memory: int) -> dict[str, str]:
    return {"memory": build_memory.setting(memory), "workers": str(build_memory.parallel_workers())}


def physical_limit(conn, data: Data) -> float:
    """Seconds for raw binary COPY of the rows into same-shaped tables plus the HNSW build."""
    content = [hashlib.sha256(t.encode()).digest() for t in data.texts]
    record = [hashlib.sha256(c).digest() for c in content]  # any 32 bytes: the columns' shape matters
    conn.execute("DROP SCHEMA IF EXISTS bench CASCADE")
    conn.execute("CREATE SCHEMA bench")
    conn.execute("CREATE TABLE bench.chunks (LIKE ragstore.chunks INCLUDING ALL)")
    # Not INCLUDING ALL: the family's HNSW index is built after the COPY, as ragstore's bulk load does.
    conn.execute(
        "CREATE TABLE bench.emb (LIKE ragstore.emb_limit INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED)"
    )
    conn.execute("ALTER TABLE bench.emb ADD PRIMARY KEY (chunk_id)")
    conn.execute("CREATE INDEX ON bench.emb (package_path text_pattern_ops)")
    conn.execute(
        "ALTER TABLE bench.emb ADD FOREIGN KEY (family, chunk_id) REFERENCES bench.chunks (family, chunk_id)"
        " ON DELETE CASCADE"
    )
    conn.commit()
    started = time.perf_counter()
    with conn.cursor() as cur:
        with cur.copy(
            "COPY bench.chunks (family, chunk_id, package_path, text, content_sha256, record_sha256, source_sha256)"
            " FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["text", "text", "text", "text", "bytea", "bytea", "bytea"])
            for i in range(data.n):
                copy.write_row(
                    ("limit", data.ids[i], data.packages[i], data.texts[i], content[i], record[i], record[i])
                )
        with cur.copy(
            "COPY bench.emb (chunk_id, package_path, embedding, model, content_sha256) FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["text", "text", "vector", "text", "bytea"])
            for i in range(data.n):
                copy.write_row((data.ids[i], data.packages[i], data.vectors[i], "bench", content[i]))
    conn.commit()
    # The build ragstore runs (ragstore/families/build_memory.py): the same memory and parallel workers.
    memory = build_memory.maintenance_bytes(build_memory.hnsw_need(data.n, "vector", "vector", data.dim))
    conn.execute(query("families", "set_build_settings"), {**build_settings(memory), "is_local": False})
    conn.execute(
        f"CREATE INDEX ON bench.emb USING hnsw (embedding vector_cosine_ops)"
        f" WITH (m = {int(HNSW_M)}, ef_construction = {int(HNSW_EF_CONSTRUCTION)})"
    )
    conn.commit()
    elapsed = time.perf_counter() - started
    conn.execute(query("families", "reset_build_settings"))
    conn.execute("DROP SCHEMA bench CASCADE")
    conn.commit()
    return elapsed


QUERIES = 500


def recall(conn, family: str, data: Data, queries: int = QUERIES, seed: int = 5) -> float:
    rng = np.random.default_rng(seed)
    picks = rng.choice(data.n, size=queries, replace=False)
    q = data.vectors[picks] + 0.3 * rng.standard_normal((queries, data.dim)).astype(np.float32)
    unit = data.vectors / np.linalg.norm(data.vectors, axis=1, keepdims=True)
    truth = np.argsort(-(q / np.linalg.norm(q, axis=1, keepdims=True)) @ unit.T, axis=1)[:, :10]
    ids = np.asarray(data.ids)
    conn.execute("SET hnsw.ef_search = 100")
    hits = 0
    for row, vector in enumerate(q):
        found = conn.execute(
            f"SELECT chunk_id FROM ragstore.emb_{family} ORDER BY embedding <=> %s LIMIT 10", (vector,)
        ).fetchall()
        hits += len({r[0] for r in found} & set(ids[truth[row]]))
    conn.commit()
    return hits / (10 * queries)


def maintenance_study(conn, family: str, data: Data) -> dict[str, float]:
    """What a VACUUM, then a REINDEX, of the family table costs and gives back in recall after the change
    (the figures behind the writer's maintenance policy)."""
    out: dict[str, float] = {}
    conn.commit()
    conn.autocommit = True
    try:
        for step, statement in (("vacuum", "VACUUM ragstore.emb_{}"), ("reindex", "REINDEX TABLE ragstore.emb_{}")):
            conn.execute("SET maintenance_work_mem = '1GB'")
            started = time.perf_counter()
            conn.execute(statement.format(family))
            out[f"{step}_s"] = time.perf_counter() - started
            out[f"recall_after_{step}"] = recall(conn, family, data)
            print(f"    {step} {out[f'{step}_s']:.2f}s, recall {out[f'recall_after_{step}']:.4f}", flush=True)
    finally:
        conn.autocommit = False
    return out


def timed_index(conn, family: str, path: Path) -> tuple[float, object]:
    started = time.perf_counter()
    report = index_sources(conn, family, open_sources([str(path)]))
    return time.perf_counter() - started, report


#: 1%-changed re-runs per input, each changing another 1% of the records; the ratio uses their median.
CHANGED_ROUNDS = 3


def run_case(
    admin: str, n: int, dim: int, folder: Path, rss: bool, study: bool, vectors: str = "clustered"
) -> dict[str, object]:
    data = Data(n, dim, vectors=vectors)
    jsonl, parquet = folder / "v.jsonl", folder / "v.parquet"
    data.write_jsonl(jsonl)
    data.write_parquet(parquet)
    out: dict[str, object] = {"rows": n, "dim": dim, "vectors": vectors, "jsonl_mb": jsonl.stat().st_size / 1e6}
    with scratch_database(admin) as dsn, connect(dsn) as conn:
        create_family(conn, "limit", ExternalBackend("bench", dim), options={"dimensions": dim})
        # The machine's speed drifts by tens of percent over minutes, so the limit is measured before the
        # first loads and again after each one: each first load is compared with the two limits around it.
        limits = [physical_limit(conn, data)]
        print(f"  physical limit {limits[0]:.1f}s", flush=True)
        for kind, path in (("jsonl", jsonl), ("parquet", parquet)):
            create_family(conn, kind, ExternalBackend("bench", dim), options={"dimensions": dim})
            first_s, first = timed_index(conn, kind, path)
            assert first.inserted == n, first  # type: ignore[attr-defined]
            rerun_s, again = timed_index(conn, kind, path)
            assert again.unchanged == n, again  # type: ignore[attr-defined]
            before = recall(conn, kind, data)
            out[kind] = {"first_s": first_s, "rerun_s": rerun_s, "recall_before": before, "changed_s": []}
            print(f"  {kind}: first {first_s:.1f}s, unchanged re-run {rerun_s:.2f}s, recall {before:.4f}", flush=True)
            limits.append(physical_limit(conn, data))
            print(f"  physical limit {limits[-1]:.1f}s", flush=True)
            out[kind]["limit_s"] = (limits[-2] + limits[-1]) / 2  # type: ignore[index]
        out["physical_limits_s"] = limits
        saved = (list(data.texts), data.vectors.copy())
        # Each round changes another 1% (text and vector) and re-runs both inputs; the recall bar is read
        # after the first round (the 1%-changed re-ingest), and is printed after the last too.
        for round_ in range(CHANGED_ROUNDS):
            data.change(0.01, seed=2 + round_)
            data.write_jsonl(jsonl)
            data.write_parquet(parquet)
            for kind, path in (("jsonl", jsonl), ("parquet", parquet)):
                changed_s, changed = timed_index(conn, kind, path)
                assert changed.updated == max(1, n // 100), changed  # type: ignore[attr-defined]
                entry = out[kind]
                assert isinstance(entry, dict)
                entry["changed_s"].append(changed_s)
                line = f"  {kind}: 1% changed re-run {round_ + 1} {changed_s:.2f}s"
                if round_ in (0, CHANGED_ROUNDS - 1):
                    after = recall(conn, kind, data)
                    entry["recall_after" if round_ == 0 else "recall_after_last"] = after
                    line += f", recall {after:.4f}"
                print(line, flush=True)
                if study and round_ == 0:
                    entry.update(maintenance_study(conn, kind, data))
        data.texts, data.vectors = saved
    if rss:
        data.write_parquet(parquet)
        with scratch_database(admin) as dsn:
            with connect(dsn) as conn:
                create_family(conn, "rss", ExternalBackend("bench", dim), options={"dimensions": dim})
            env = dict(os.environ, RAGSTORE_HOME=str(folder / "home"))
            # wait4 gives this child's own peak RSS (RUSAGE_CHILDREN would also count the embedded server).
            child = subprocess.Popen(
                [sys.executable, "-m", "ragstore.cli", "--dsn", dsn, "index", "rss", str(parquet)],
                env=env,
                stdout=subprocess.DEVNULL,
            )
            _, status, usage = os.wait4(child.pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0
            out["parquet_peak_rss_mb"] = usage.ru_maxrss / 1024
    return out


def write_parquet_streamed(path: Path, n: int, dim: int, group: int = 50_000, seed: int = 7) -> None:
    """SIZE x DIM random rows written row group by row group (the benchmark itself stays small)."""
    rng = np.random.default_rng(seed)
    schema = pa.schema(
        [
            ("chunk_id", pa.string()),
            ("package_path", pa.string()),
            ("text", pa.string()),
            ("vector", pa.list_(pa.float32(), dim)),
        ]
    )
    with pq.ParquetWriter(path, schema) as out:
        for start in range(0, n, group):
            rows = range(start, min(n, start + group))
            flat = pa.array(rng.standard_normal(len(rows) * dim).astype(np.float32), type=pa.float32())
            out.write_table(
                pa.table(
                    {
                        "chunk_id": pa.array([f"{i:08d}-{rng.bytes(8).hex()}" for i in rows]),
                        "package_path": pa.array([f"pkg/{i % 100:02d}" for i in rows]),
                        "text": pa.array([f"{WORDS[i % len(WORDS)]} row {i}" for i in rows]),
                        "vector": pa.FixedSizeListArray.from_arrays(flat, dim),
                    },
                    schema=schema,
                )
            )


def rss_only(admin: str, n: int, dim: int, folder: Path, timeout: float, stop_at_build: bool) -> dict[str, object]:
    """Peak RSS of a ``ragstore index`` process loading a SIZE x DIM Parquet file, sampled from /proc every
    0.2 s with the phase it was in (the family table's row count, and whether the server was building the
    HNSW index); stopped after ``timeout`` seconds if it has not ended (the index build runs in the server,
    not in this process), or 30 s after the build began with ``stop_at_build``."""
    import signal

    parquet = folder / "rss.parquet"
    write_parquet_streamed(parquet, n, dim)
    out: dict[str, object] = {"rows": n, "dim": dim, "parquet_mb": parquet.stat().st_size / 1e6}
    with scratch_database(admin) as dsn:
        with connect(dsn) as conn:
            create_family(conn, "rss", ExternalBackend("bench", dim), options={"dimensions": dim})
        env = dict(os.environ, RAGSTORE_HOME=str(folder / "home"))
        started = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, "-m", "ragstore.cli", "--dsn", dsn, "index", "rss", str(parquet)],
            env=env,
            stdout=subprocess.DEVNULL,
        )
        peak, peak_at, building_at = 0, 0.0, None
        with connect(dsn) as watch:
            watch.autocommit = True
            while child.poll() is None:
                try:
                    status = Path(f"/proc/{child.pid}/status").read_text()
                except FileNotFoundError:
                    break
                rss = next((int(x.split()[1]) for x in status.splitlines() if x.startswith("VmRSS:")), 0)
                if rss > peak:
                    peak, peak_at = rss, time.perf_counter() - started
                if building_at is None:
                    row = watch.execute(
                        "SELECT count(*) FROM pg_stat_progress_create_index WHERE relid = 'ragstore.emb_rss'::regclass"
                    ).fetchone()
                    if row and row[0]:
                        building_at = time.perf_counter() - started
                        print(
                            f"  HNSW build began at {building_at:.0f}s; peak RSS so far {peak / 1024:.0f} MB",
                            flush=True,
                        )
                now = time.perf_counter()
                if now - started > timeout or (
                    stop_at_build and building_at is not None and now - started > building_at + 30
                ):
                    child.send_signal(signal.SIGINT)
                    try:
                        child.wait(30)
                    except subprocess.TimeoutExpired:
                        child.kill()
                        child.wait()
                    break
                time.sleep(0.2)
            elapsed = time.perf_counter() - started
            rows = watch.execute("SELECT count(*) FROM ragstore.emb_rss").fetchone()
            index = watch.execute("SELECT count(*) FROM pg_indexes WHERE indexname LIKE '%%hnsw%%'").fetchone()
        out.update(
            {
                "peak_rss_mb": peak / 1024,
                "peak_at_s": peak_at,
                "hnsw_build_began_s": building_at,
                "elapsed_s": elapsed,
                "returncode": child.returncode,
                "rows_loaded": rows[0] if rows else None,
                "hnsw_index_built": bool(index and index[0]),
            }
        )
    print(f"  {json.dumps(out)}", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="100000:384", help="comma-separated SIZE:DIM")
    parser.add_argument("--rss", action="store_true", help="also measure a `ragstore index` process's peak RSS")
    parser.add_argument(
        "--maintenance", action="store_true", help="after the 1%% change, time a VACUUM and a REINDEX, and their recall"
    )
    parser.add_argument("--rss-only", default=None, help="SIZE:DIM: only the peak RSS of a Parquet load, sampled")
    parser.add_argument("--rss-timeout", type=float, default=3600, help="with --rss-only: stop the load after S s")
    parser.add_argument("--rss-stop-at-build", action="store_true", help="with --rss-only: stop 30 s into the build")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--vectors", choices=VECTORS, default="clustered", help="how the vectors are drawn (see above)")
    args = parser.parse_args()
    results = []
    print(f"load average at start: {os.getloadavg()}", flush=True)
    if args.rss_only:
        n, dim = (int(x) for x in args.rss_only.split(":"))
        with admin_dsn() as admin, tempfile.TemporaryDirectory(prefix="ragstore-bench-") as folder:
            results.append(rss_only(admin, n, dim, Path(folder), args.rss_timeout, args.rss_stop_at_build))
        print(f"load average at end: {os.getloadavg()}", flush=True)
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
        return
    with admin_dsn() as admin:
        for case in args.cases.split(","):
            n, dim = (int(x) for x in case.split(":"))
            print(f"{n:,} x {dim} ({args.vectors} vectors):", flush=True)
            with tempfile.TemporaryDirectory(prefix="ragstore-bench-") as folder:
                r = run_case(admin, n, dim, Path(folder), args.rss, args.maintenance, args.vectors)
            results.append(r)
            limits = r["physical_limits_s"]
            assert isinstance(limits, list)
            shown = ", ".join(f"{x:.1f}s" for x in limits)
            print(f"  physical limits {shown} (before, between and after the first loads)")
            for kind in ("jsonl", "parquet"):
                k = r[kind]
                assert isinstance(k, dict)
                limit, changed = k["limit_s"], k["changed_s"]
                middle = float(np.median(changed))
                print(
                    f"  {kind:8} first {k['first_s']:.1f}s = {limit / k['first_s']:.2f}x physical (mean {limit:.1f}s"
                    f" of the two around it) | unchanged {k['first_s'] / k['rerun_s']:.1f}x faster | 1% changed"
                    f" {k['first_s'] / middle:.1f}x faster (median of "
                    + ", ".join(f"{k['first_s'] / c:.1f}x" for c in changed)
                    + f") | recall@10 {k['recall_before']:.4f} -> {k['recall_after']:.4f}"
                    f" ({k['recall_after'] - k['recall_before']:+.4f}; {k['recall_after_last']:.4f} after"
                    f" {len(changed)} rounds)",
                    flush=True,
                )
            if "parquet_peak_rss_mb" in r:
                print(f"  parquet load peak RSS {r['parquet_peak_rss_mb']:.0f} MB", flush=True)
    print(f"load average at end: {os.getloadavg()}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
