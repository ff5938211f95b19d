"""``sync run --follow``: how soon a committed change is searchable, and whether a failing provider of one
family delays another.

    python benchmarks/sync_follow.py --changes 200 [--failing]

Family "docs" (offline backend) follows a table; a ``follow_workers`` run (what ``ragstore sync run
--follow`` runs) syncs it. The table then gets CHANGES changes, one commit each (inserts and updates of the
text, in turn); for each, the time from its commit until its chunk holds the new text (the chunk row and
its vector are committed together, so it is searchable then) is measured by polling every 2 ms. Prints
p50, p95 and the most. With ``--failing``, family "bad" follows a second table through an OpenAI-compatible
stub on 127.0.0.1 that answers every request 429 or 500 in turn, and that table changes as often: the
figures are then "docs"' lag while "bad" fails and backs off. Uses $RAGSTORE_DSN if set, else a
throwaway embedded server.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from _db import admin_dsn, scratch_database

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend
from ragstore.embed.openai import OpenAIBackend
from ragstore.families import create_family
from ragstore.sync.sources import add_source
from ragstore.sync.sources import status as sync_status
from ragstore.sync.worker import follow_workers


class Failing(BaseHTTPRequestHandler):
    """Every request answered 429, then 500, in turn; counted."""

    served = 0

    def do_POST(self) -> None:
        Failing.served += 1
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        code = 429 if Failing.served % 2 else 500
        body = json.dumps({"error": {"message": "failing on purpose"}}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--failing", action="store_true", help="a second family on a provider failing 429/500")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    latencies: list[float] = []
    with admin_dsn() as admin, scratch_database(admin) as dsn, connect(dsn) as conn:
        for table in ("docs", "bad"):
            conn.execute(f"CREATE TABLE public.{table} (id int PRIMARY KEY, body text)")
            conn.execute(f"INSERT INTO public.{table} SELECT i, 'row ' || i FROM generate_series(1, 100) AS i")
        conn.commit()
        create_family(conn, "docs", OfflineBackend())
        add_source(conn, "docs", "public.docs", id_column="id", text_columns=["body"])
        if args.failing:
            backend = OpenAIBackend(base_url=url, model="m", dim=8, api_key_env="NO_SUCH_KEY_VAR", max_retries=0)
            create_family(conn, "bad", backend, options={"base_url": url, "max_retries": 0})
            add_source(conn, "bad", "public.bad", id_column="id", text_columns=["body"])
        stop = threading.Event()
        worker = threading.Thread(target=follow_workers, args=(dsn,), kwargs={"stop": stop.is_set}, daemon=True)
        worker.start()
        while conn.execute("SELECT count(*) FROM ragstore.chunks WHERE family = 'docs'").fetchone()[0] < 100:
            conn.commit()
            time.sleep(0.05)
        conn.commit()
        started = time.monotonic()
        for n in range(args.changes):
            key = 1000 + n if n % 2 == 0 else 1 + n % 100
            text = f"change {n} of the benchmark"
            if args.failing:
                conn.execute("UPDATE public.bad SET body = %s WHERE id = %s", (text, 1 + n % 100))
            if n % 2 == 0:
                conn.execute("INSERT INTO public.docs VALUES (%s, %s)", (key, text))
            else:
                conn.execute("UPDATE public.docs SET body = %s WHERE id = %s", (text, key))
            conn.commit()
            committed = time.perf_counter()
            while True:
                row = conn.execute(
                    "SELECT 1 FROM ragstore.chunks WHERE family = 'docs' AND chunk_id = %s AND text = %s",
                    (f"docs/{key}", text),
                ).fetchone()
                conn.commit()
                if row:
                    break
                time.sleep(0.002)
            latencies.append(time.perf_counter() - committed)
        seconds = time.monotonic() - started
        state = {s["family"]: s for s in sync_status(conn)}
        stop.set()
        conn.execute("NOTIFY ragstore_sync_docs")
        conn.execute("NOTIFY ragstore_sync_bad")
        conn.commit()
        worker.join(timeout=30)
    server.shutdown()
    print(f"changes {args.changes} over {seconds:.1f} s, offline backend, one worker per family")
    print(
        f"commit -> searchable: p50 {statistics.median(latencies) * 1000:.0f} ms, "
        f"p95 {percentile(latencies, 0.95) * 1000:.0f} ms, most {max(latencies) * 1000:.0f} ms"
    )
    if args.failing:
        bad = state["bad"]
        print(
            f"failing family: {Failing.served} requests refused (429/500), {bad['queued']} keys queued, "
            f"{bad['backing_off']} backing off, lag {bad['lag_seconds']:.1f} s, last error: {bad['last_error']}"
        )


if __name__ == "__main__":
    main()
