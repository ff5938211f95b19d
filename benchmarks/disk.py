"""What the disk holds after a family drop and a large prune, and what ``ragstore vacuum`` returns.

    python benchmarks/disk.py                 # 100,000 chunks of the offline backend per family
    python benchmarks/disk.py --rows 20000

On a throwaway embedded server (its own home, removed at the end), through the library calls the CLI
makes: family ``big`` is indexed with N chunks (60 words each), then family ``kept`` with N/10 after it (so
``big``'s rows lie before ``kept``'s in every shared table, the usual case). Then ``big`` is dropped,
``vacuum`` and ``vacuum --full`` run, and the WAL is checkpointed. Then family ``pruned`` gets N chunks and
is re-indexed with half of them and ``prune``, then vacuumed the same two ways. After each step it prints
the data folder (``du``), its ``pg_wal`` part and ``pg_database_size``, in MB.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg

from ragstore import migrate
from ragstore.db.server import EmbeddedServer
from ragstore.embed.offline import OfflineBackend
from ragstore.store import Store

VOCABULARY = [f"w{i}" for i in range(20_000)]


def records(family: str, rows: int, half: bool = False) -> Iterator[dict[str, str]]:
    """``rows`` chunks of 60 words over 100 packages; with ``half``, every other run of 100 only (each
    package keeps half its chunks)."""
    for i in range(rows):
        if half and (i // 100) % 2:
            continue
        words = " ".join(VOCABULARY[(i * 7919 + j * j * 104729) % len(VOCABULARY)] for j in range(60))
        yield {"chunk_id": f"{family}-{i}", "package_path": f"pkg{i % 100}/doc", "text": words}


def megabytes(path: Path) -> float:
    out = subprocess.run(["du", "-sk", str(path)], check=True, capture_output=True, text=True).stdout
    return int(out.split()[0]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="ragstore-disk-"))
    server = EmbeddedServer(home)
    try:
        dsn = server.ensure_running()
        migrate.upgrade(dsn)
        with Store(dsn) as store, psycopg.connect(dsn, autocommit=True) as conn:

            def show(step: str) -> None:
                db = conn.execute("SELECT pg_database_size(current_database())").fetchone()
                assert db is not None
                data, wal = megabytes(server.data_dir), megabytes(server.data_dir / "pg_wal")
                print(f"| {step} | {data:.0f} | {wal:.0f} | {db[0] / 1024 / 1024:.0f} |", flush=True)

            print("| step | data folder MB | of it pg_wal MB | database MB |\n|---|---|---|---|")
            show("fresh, migrated")
            for name, rows in (("big", args.rows), ("kept", args.rows // 10)):
                store.create_family(name, OfflineBackend())
                store.index(records(name, rows), name)
            show(f"big ({args.rows}) and kept ({args.rows // 10}) indexed")
            store.drop_family("big")
            show("big dropped")
            store.vacuum()
            show("ragstore vacuum")
            store.vacuum(full=True)
            show("ragstore vacuum --full")
            conn.execute("CHECKPOINT")
            show("after a checkpoint")
            store.create_family("pruned", OfflineBackend())
            store.index(records("pruned", args.rows), "pruned")
            show(f"pruned ({args.rows}) indexed")
            report = store.index(records("pruned", args.rows, half=True), "pruned", prune=True)
            show(f"re-indexed with half, --prune ({report.pruned} pruned)")
            store.vacuum("pruned")
            show("ragstore vacuum pruned")
            store.vacuum("pruned", full=True)
            show("ragstore vacuum pruned --full")
            conn.execute("CHECKPOINT")
            show("after a checkpoint")
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
