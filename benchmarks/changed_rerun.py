"""A 1%-changed re-run of precomputed vectors, alternating migration revisions, in one family and one run.

    python benchmarks/changed_rerun.py --revisions 0018,0017,0018,0017,0018,0017

Loads SIZE x DIM clustered records (``ingest_precomputed.Data``) from JSONL into one ``external`` family
at the head revision, then, for each revision listed, migrates the database to it (off the clock), changes
another 1% of the records (text and vector), issues a ``CHECKPOINT`` (so the run pays the full-page
images a real re-run after a checkpoint pays) and times ``index_sources`` of the file. Prints each time
and the times per revision. Uses $RAGSTORE_DSN if set, else a throwaway embedded server.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from _db import admin_dsn, scratch_database
from ingest_precomputed import Data

from ragstore import migrate
from ragstore.db.connection import connect
from ragstore.embed.external import ExternalBackend
from ragstore.families import create_family
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources


@contextlib.contextmanager
def loaded(rows: int, dim: int) -> Iterator[tuple[Data, Path, str]]:
    """ROWS x DIM records written as JSONL and loaded into family "j" of a scratch database (the first load
    timed and printed): the data, the file and the database's DSN."""
    data = Data(rows, dim)
    with tempfile.TemporaryDirectory(prefix="ragstore-bench-") as folder, admin_dsn() as admin:
        jsonl = Path(folder) / "v.jsonl"
        data.write_jsonl(jsonl)
        with scratch_database(admin) as dsn:
            with connect(dsn) as conn:
                create_family(conn, "j", ExternalBackend("bench", dim), options={"dimensions": dim})
                started = time.perf_counter()
                index_sources(conn, "j", open_sources([str(jsonl)]))
                print(f"first load {time.perf_counter() - started:.1f}s", flush=True)
            yield data, jsonl, dsn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--revisions", required=True, help="comma-separated revisions, one re-run each")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    args = parser.parse_args()
    with loaded(args.rows, args.dim) as (data, jsonl, dsn):
        times: dict[str, list[float]] = {}
        for k, revision in enumerate(args.revisions.split(",")):
            current = migrate.current_revision(dsn) or ""
            if revision > current:
                migrate.upgrade(dsn, revision)
            elif revision < current:
                migrate.downgrade(dsn, revision)
            data.change(0.01, seed=20 + k)
            data.write_jsonl(jsonl)
            with connect(dsn) as conn:
                conn.autocommit = True
                conn.execute("CHECKPOINT")
                conn.autocommit = False
                started = time.perf_counter()
                report = index_sources(conn, "j", open_sources([str(jsonl)]))
                elapsed = time.perf_counter() - started
            times.setdefault(revision, []).append(elapsed)
            print(f"{revision}: 1% changed re-run {elapsed:.2f}s ({report.updated} updated)", flush=True)
        for revision, values in times.items():
            listed = " / ".join(f"{v:.2f}" for v in values)
            print(f"{revision}: {listed} s, mean {sum(values) / len(values):.2f} s")


if __name__ == "__main__":
    main()
