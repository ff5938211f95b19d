"""``sync run --once`` against ``ragstore index`` of the same rows as JSONL, in one run.

    python benchmarks/sync.py --rows 10000

Makes a table of ROWS rows (id, title, body) in a scratch database; family "j" indexes the rows exported
as JSONL (the records ``sync run`` would write: chunk_id ``docs/<id>``, text ``title\\n\\nbody``) with
``index_sources``, family "s" follows the table (``sync add``, off the clock) and ``run_once`` syncs it.
Both use the offline backend. Prints each rate, the ratio and whether both families hold the same chunks
(chunk ids and texts). Uses $RAGSTORE_DSN if set, else a throwaway embedded server.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from pathlib import Path

from _db import admin_dsn, scratch_database

from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend
from ragstore.families import create_family
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from ragstore.sync.sources import add_source
from ragstore.sync.worker import BATCH, run_once

WORDS = "tar gzip rsync archive stream block file copy disk table index query vector search row page".split()


def body(i: int) -> str:
    return " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(40)) + f" item {i}"


def content_hash(conn: object, family: str) -> str:
    rows = conn.execute(  # type: ignore[attr-defined]
        'SELECT chunk_id, text FROM ragstore.chunks WHERE family = %s ORDER BY chunk_id COLLATE "C"', (family,)
    ).fetchall()
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--batch-size", type=int, default=BATCH, help="keys per sync batch")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ragstore-bench-") as folder, admin_dsn() as admin:
        with scratch_database(admin) as dsn, connect(dsn) as conn:
            conn.execute("CREATE TABLE public.docs (id bigint PRIMARY KEY, title text, body text)")
            with conn.cursor().copy("COPY public.docs (id, title, body) FROM STDIN") as copy:
                for i in range(1, args.rows + 1):
                    copy.write_row((i, f"title {i}", body(i)))
            conn.commit()
            jsonl = Path(folder) / "docs.jsonl"
            with jsonl.open("w", encoding="utf-8") as out:
                for i in range(1, args.rows + 1):
                    record = {"chunk_id": f"docs/{i}", "package_path": f"docs/{i}", "text": f"title {i}\n\n{body(i)}"}
                    out.write(json.dumps(record) + "\n")
            create_family(conn, "j", OfflineBackend())
            create_family(conn, "s", OfflineBackend())
            add_source(conn, "s", "public.docs", id_column="id", text_columns=["title", "body"])
            started = time.perf_counter()
            index_sources(conn, "j", open_sources([str(jsonl)]))
            index_seconds = time.perf_counter() - started
            started = time.perf_counter()
            report = run_once(conn, batch=args.batch_size)
            sync_seconds = time.perf_counter() - started
            assert report.written == args.rows and not report.failures, report
            same = content_hash(conn, "j") == content_hash(conn, "s")
    index_rate, sync_rate = args.rows / index_seconds, args.rows / sync_seconds
    print(f"rows {args.rows}, sync batch {args.batch_size}")
    print(f"ragstore index (JSONL): {index_rate:,.0f} rows/s ({index_seconds:.1f} s)")
    print(f"sync run --once:        {sync_rate:,.0f} rows/s ({sync_seconds:.1f} s)")
    print(f"sync / index: {sync_rate / index_rate:.2f}x; same chunks (ids and texts): {same}")


if __name__ == "__main__":
    main()
