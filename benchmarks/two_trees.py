"""Two code trees of ragstore, A/B/A/B in one run: the 1%-changed re-run and the Parquet first load.

    python benchmarks/two_trees.py --trees /tmp/base,. --rounds 3 --rows 100000 --dim 384

Loads SIZE x DIM clustered records (``ingest_precomputed.Data``) from JSONL into one ``external`` family
(with this tree: ``changed_rerun.loaded``). Then, each round, for each tree in turn (A, B, A, B, ...):

* changes another 1% of the records (text and vector), writes the JSONL file again, issues a
  ``CHECKPOINT`` (the re-run pays the full-page images a real one pays after a checkpoint) and times
  ``index_sources`` of the file in a child process that imports ragstore from that tree;
* times a Parquet first load of the records into a new family (dropped after), the same way, and once a
  round the physical limit (``ingest_precomputed.physical_limit``) for the ratio.

The child also reports the seconds from the end of the one pass (``on_validated``) to the end of the run:
the writing, where two connections can help (the pass reads and hashes the file on one core either way).
While a child runs, the server's activity is sampled every 20 ms: the share of samples where two of the
child's connections were running a statement at once, and where one of them was waiting for a lock, show
whether two connections really overlapped. Prints each measurement with the load average, then medians.
Both trees must share the migration head (the database is migrated once, by this tree).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
from changed_rerun import loaded
from ingest_precomputed import physical_limit

from ragstore.db.connection import connect
from ragstore.embed.external import ExternalBackend
from ragstore.families import create_family, drop_family

CHILD = """
import json, sys, time
import ragstore
from ragstore.db.connection import connect
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
dsn, family, path = sys.argv[1:4]
with connect(dsn) as conn:
    conn.execute("SET application_name = 'two_trees'")
    conn.commit()
    print("ready", flush=True)
    started = time.perf_counter()
    validated = []
    report = index_sources(
        conn, family, open_sources([path]), on_validated=lambda n: validated.append(time.perf_counter())
    )
    ended = time.perf_counter()
    seconds = ended - started
print(json.dumps({"tree": ragstore.__file__, "seconds": seconds, "after_pass": ended - validated[0],
                  "inserted": report.inserted,
                  "updated": report.updated, "unchanged": report.unchanged, "retries": report.retries,
                  "batches": report.batches}), flush=True)
"""


class Sampler:
    """Samples pg_stat_activity of the child's database every 20 ms while it runs."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.samples = 0
        self.both = 0
        self.waiting = 0
        self.events: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self._stop.is_set():
                rows = conn.execute(
                    "SELECT state, wait_event_type, wait_event FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
                ).fetchall()
                active = [r for r in rows if r[0] == "active"]
                if active:
                    self.samples += 1
                    self.both += len(active) >= 2
                    self.waiting += any(r[1] == "Lock" for r in active)
                    for r in active:
                        if r[1] == "Lock":
                            self.events[r[2]] = self.events.get(r[2], 0) + 1
                time.sleep(0.02)

    def shares(self) -> str:
        if not self.samples:
            return "no active samples"
        events = " ".join(f"{k}:{v}" for k, v in sorted(self.events.items()))
        share = f"two active {self.both / self.samples:.0%}, lock wait {self.waiting / self.samples:.0%}"
        return f"{share} of {self.samples} samples" + (f" ({events})" if events else "")


def child(tree: Path, dsn: str, family: str, path: Path) -> tuple[dict[str, object], str]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, dsn, family, str(path)], env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    with Sampler(dsn) as sampler:
        out = proc.stdout.readline()
        proc.wait()
    if proc.returncode:
        raise SystemExit(f"child failed in {tree}")
    return json.loads(out), sampler.shares()


def load() -> str:
    return "load " + " ".join(f"{v:.2f}" for v in os.getloadavg())


def measure(label: str, tree: Path, dsn: str, family: str, path: Path, times: list[float]) -> dict[str, object]:
    """Time the child's ``index_sources`` of ``path`` into ``family`` with ``tree``; print and keep it."""
    before = load()
    result, shares = child(tree, dsn, family, path)
    seconds = float(result["seconds"])  # type: ignore[arg-type]
    times.append(seconds)
    counts = ", ".join(f"{result[k]} {k}" for k in ("inserted", "updated", "unchanged", "batches", "retries"))
    after = float(result["after_pass"])  # type: ignore[arg-type]
    print(
        f"{label} {seconds:.2f}s, {after:.2f}s after the pass ({counts}; {shares}; {before}) [{result['tree']}]",
        flush=True,
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", required=True, help="two code trees, comma-separated (A,B)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--no-parquet", action="store_true", help="the 1%%-changed re-runs only")
    args = parser.parse_args()
    trees = [Path(t).resolve() for t in args.trees.split(",")]
    rerun: dict[int, list[float]] = {0: [], 1: []}
    writing: dict[int, list[float]] = {0: [], 1: []}
    parquet_s: dict[int, list[float]] = {0: [], 1: []}
    limits: list[float] = []
    backend = ExternalBackend("bench", args.dim)
    with loaded(args.rows, args.dim) as (data, jsonl, dsn):
        parquet = jsonl.with_suffix(".parquet")
        step = 0
        for round_ in range(args.rounds):
            for arm, tree in enumerate(trees):
                data.change(0.01, seed=20 + step)
                step += 1
                data.write_jsonl(jsonl)
                checkpoint(dsn)
                result = measure(f"round {round_} {'AB'[arm]} 1% re-run", tree, dsn, "j", jsonl, rerun[arm])
                writing[arm].append(float(result["after_pass"]))  # type: ignore[arg-type]
            if args.no_parquet:
                continue
            data.write_parquet(parquet)
            with connect(dsn) as conn:
                create_family(conn, "limit", backend, options={"dimensions": args.dim})
                before = load()
                limits.append(physical_limit(conn, data))
                drop_family(conn, "limit")
            print(f"round {round_} physical limit {limits[-1]:.1f}s ({before})", flush=True)
            for arm, tree in enumerate(trees):
                with connect(dsn) as conn:
                    create_family(conn, "p", backend, options={"dimensions": args.dim})
                checkpoint(dsn)
                label = f"round {round_} {'AB'[arm]} Parquet first load"
                measure(label, tree, dsn, "p", parquet, parquet_s[arm])
                print(f"    limit/load {limits[-1] / parquet_s[arm][-1]:.2f}", flush=True)
                with connect(dsn) as conn:
                    drop_family(conn, "p")
    for arm, tree in enumerate(trees):
        print(f"{'AB'[arm]} = {tree}")
        for name, values in (("1% re-run", rerun[arm]), ("  of which after the pass", writing[arm])):
            listed = " / ".join(f"{v:.2f}" for v in values)
            print(f"  {name}: {listed} s, median {statistics.median(values):.2f}")
        if parquet_s[arm]:
            ratios = [lim / v for lim, v in zip(limits, parquet_s[arm], strict=True)]
            print(
                f"  Parquet first load: {' / '.join(f'{v:.1f}' for v in parquet_s[arm])} s, "
                f"median {statistics.median(parquet_s[arm]):.1f}; limit/load median {statistics.median(ratios):.2f}"
            )
    if rerun[0] and rerun[1]:
        print(f"re-run median A/B: {statistics.median(rerun[0]) / statistics.median(rerun[1]):.2f}x", end="")
        print(f", after the pass {statistics.median(writing[0]) / statistics.median(writing[1]):.2f}x")


def checkpoint(dsn: str) -> None:
    with connect(dsn) as conn:
        conn.autocommit = True
        conn.execute("CHECKPOINT")


if __name__ == "__main__":
    main()
