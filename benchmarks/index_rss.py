"""Peak RSS and embed rate of one ``ragstore index`` run into a MiniLM family (a fresh database).

    python benchmarks/index_rss.py --dataset PATH/TO/manpages/corpus.jsonl [--dsn ...] [--limit N]

PATH is anything ``ragstore index`` reads (a JSONL file, a folder of documents). The run is a child
process (``python -m ragstore.cli index rss PATH``) whose VmRSS is read from /proc every 0.2 s; its peak,
the wall time, the report line (with the embed rate) and ``uptime`` before and after are printed.
Without ``--dsn`` / ``$RAGSTORE_DSN`` an embedded server is started in a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _db import admin_dsn, scratch_database

from ragstore import families
from ragstore.db.connection import connect
from ragstore.embed.minilm import MiniLMBackend


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True, help="what to index: a JSONL file or a folder")
    parser.add_argument("--dsn", default=None)
    parser.add_argument("--limit", type=int, default=0, help="index the first N JSONL lines only (0: all)")
    parser.add_argument("--batch-size", type=int, default=0, help="ragstore index --batch-size (0: its default)")
    args = parser.parse_args()
    source = Path(args.dataset)
    with tempfile.TemporaryDirectory() as tmp, admin_dsn(args.dsn) as admin, scratch_database(admin) as dsn:
        if args.limit and source.is_file():
            cut = Path(tmp) / "corpus.jsonl"
            with source.open(encoding="utf-8") as lines, cut.open("w", encoding="utf-8") as out:
                for n, line in enumerate(lines):
                    if n == args.limit:
                        break
                    out.write(line)
            source = cut
        with connect(dsn) as conn:
            families.create_family(conn, "rss", MiniLMBackend())
        print("before:", _uptime(), flush=True)
        command = [sys.executable, "-m", "ragstore.cli", "--dsn", dsn, "index", "rss", str(source), "--no-progress"]
        if args.batch_size:
            command += ["--batch-size", str(args.batch_size)]
        started = time.perf_counter()
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        peak = 0
        while child.poll() is None:
            peak = max(peak, _rss_kb(child.pid))
            time.sleep(0.2)
        out, err = child.communicate()
        seconds = time.perf_counter() - started
        print("after:", _uptime())
        if child.returncode != 0:
            sys.exit(f"ragstore index failed: {err.strip()}")
        print(out.strip())
        print(
            json.dumps(
                {"dataset": str(args.dataset), "peak_rss_mb": round(peak / 1024, 1), "seconds": round(seconds, 1)}
            )
        )


if __name__ == "__main__":
    main()
