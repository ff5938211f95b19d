"""What the full-text postings cost on the write path: an ingest with and without a foreign key on them,
with and without each word's document frequency kept (``--compare df``), or with and without their
``(family, chunk_id)`` index (``--compare chunkidx``).

    python benchmarks/postings.py                      # 20,000 chunks of ~100 words, 384-d vectors
    python benchmarks/postings.py --rows 50000 --words 150
    python benchmarks/postings.py --compare df         # revision 0017's counts against 0016
    python benchmarks/postings.py --compare chunkidx   # revision 0017's chunk-id index against 0018

Every chunk written to ragstore.chunks gets one row in ragstore.chunk_terms per distinct word (its
postings, written by the chunk triggers, read by BM25 full text). Until revision 0016 those rows had a
foreign key to the chunks, checked once per posting. This script loads the same JSONL of precomputed
vectors (prose-like texts: words drawn from a Zipf law over a 20,000-word vocabulary) into fresh
``external`` families through ``index_sources`` (what ``ragstore index`` runs: pass, COPY, triggers, HNSW
build), alternately with that foreign key put back as it was and without it (as the schema is now), two
runs of each, in one database, and prints the seconds, the postings written and the ratio. Uses
$RAGSTORE_DSN if set, else a throwaway embedded server.

With ``--compare df`` the two variants are revision 0016 (the triggers write the postings only) and 0017
(they also keep ragstore.chunk_term_df, each word's number of chunks, which BM25 reads instead of counting
the postings): the database is migrated down or up before each load.

With ``--compare chunkidx`` they are revision 0017 (each posting also goes into the index
``chunk_terms_chunk_idx (family, chunk_id)``, which the delete and text-change triggers searched) and 0018
(the primary key alone; those triggers find a chunk's postings through it from the old row's terms). After
each load the script also times the chunk triggers' work alone, one statement each: an INSERT of a copy of
the family's chunks into another family (postings written, no vectors, no HNSW), a text change of every
10th chunk, then a delete of every 10th other chunk.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson
from _db import admin_dsn, scratch_database

from ragstore import migrate
from ragstore.db.connection import connect
from ragstore.embed.external import ExternalBackend
from ragstore.families import create_family
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources

FOREIGN_KEY = (
    "ALTER TABLE ragstore.chunk_terms ADD CONSTRAINT chunk_terms_chunk_fkey FOREIGN KEY (family, chunk_id)"
    " REFERENCES ragstore.chunks (family, chunk_id) ON DELETE CASCADE"
)


def write_jsonl(path: Path, rows: int, words: int, dim: int, seed: int = 3) -> None:
    rng = np.random.default_rng(seed)
    vocab = np.asarray([f"w{i}" for i in range(20_000)])
    centres = rng.standard_normal((100, dim)).astype(np.float32)
    with path.open("wb") as out:
        for i in range(rows):
            text = " ".join(vocab[(rng.zipf(1.3, words) - 1) % len(vocab)])
            vector = centres[i % 100] + 0.5 * rng.standard_normal(dim).astype(np.float32)
            record = {"chunk_id": f"c{i}", "package_path": f"pkg/{i % 100}", "text": text}
            out.write(
                orjson.dumps(record)[:-1]
                + b',"vector":'
                + orjson.dumps(vector, option=orjson.OPT_SERIALIZE_NUMPY)
                + b"}\n"
            )


# --compare: the revision with the variant on, and the one with it off (None: the foreign key, put back by hand)
REVISIONS = {"fk": None, "df": ("0017", "0016"), "chunkidx": ("0017", "0018")}


def migrate_to(dsn: str, revision: str) -> None:
    current = migrate.current_revision(dsn)
    if current is None or int(current) < int(revision):
        migrate.upgrade(dsn, revision)
    elif int(current) > int(revision):
        migrate.downgrade(dsn, revision)


CHUNK_COLUMNS = "chunk_id, package_path, text, content_sha256, record_sha256, metadata, fts_config, source_sha256"


def churn(conn, name: str, rows: int, dim: int) -> tuple[float, float, float]:
    """The seconds of the chunk triggers' work alone, one statement each (committed): an INSERT of a copy of
    family ``name``'s chunks into a new family (their postings written, no vectors), then a text change of
    every 10th chunk of ``name`` and a delete of every 10th other chunk."""
    create_family(conn, f"{name}_copy", ExternalBackend("bench", dim), options={"dimensions": dim})
    conn.commit()
    started = time.perf_counter()
    conn.execute(
        f"INSERT INTO ragstore.chunks (family, {CHUNK_COLUMNS}) SELECT %s, {CHUNK_COLUMNS} FROM ragstore.chunks"
        " WHERE family = %s",
        (f"{name}_copy", name),
    )
    conn.commit()
    inserted = time.perf_counter() - started
    changed = [f"c{i}" for i in range(0, rows, 10)]
    deleted = [f"c{i}" for i in range(5, rows, 10)]
    started = time.perf_counter()
    conn.execute(
        "UPDATE ragstore.chunks SET text = text || ' w1 churned' WHERE family = %s AND chunk_id = ANY (%s)",
        (name, changed),
    )
    conn.commit()
    updated = time.perf_counter() - started
    started = time.perf_counter()
    conn.execute("DELETE FROM ragstore.chunks WHERE family = %s AND chunk_id = ANY (%s)", (name, deleted))
    conn.commit()
    return inserted, updated, time.perf_counter() - started


def load(conn, name: str, path: Path, dim: int, variant: bool, compare: str, dsn: str) -> tuple[float, int]:
    """Ingest ``path`` into a new family ``name`` with the variant on (the foreign key, the counts of
    revision 0017, or the chunk-id index) or off; the seconds and the postings written."""
    foreign_key = variant and compare == "fk"
    revisions = REVISIONS[compare]
    if revisions is not None:
        conn.commit()
        migrate_to(dsn, revisions[0] if variant else revisions[1])
    if foreign_key:
        conn.execute(FOREIGN_KEY)
    conn.commit()
    create_family(conn, name, ExternalBackend("bench", dim), options={"dimensions": dim})
    started = time.perf_counter()
    index_sources(conn, name, open_sources([str(path)]))
    elapsed = time.perf_counter() - started
    postings = conn.execute("SELECT count(*) FROM ragstore.chunk_terms WHERE family = %s", (name,)).fetchone()[0]
    if foreign_key:
        conn.execute("ALTER TABLE ragstore.chunk_terms DROP CONSTRAINT chunk_terms_chunk_fkey")
    conn.commit()
    return elapsed, int(postings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--words", type=int, default=100, help="words per chunk")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--runs", type=int, default=2, help="runs of each variant, alternated")
    parser.add_argument(
        "--compare",
        choices=tuple(REVISIONS),
        default="fk",
        help="the postings' foreign key, 0017's counts, or 0017's chunk-id index against 0018",
    )
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}", flush=True)
    times: dict[bool, list[float]] = {True: [], False: []}
    churned: dict[bool, list[tuple[float, float, float]]] = {True: [], False: []}
    with admin_dsn() as admin, scratch_database(admin) as dsn, connect(dsn) as conn:
        with tempfile.TemporaryDirectory(prefix="ragstore-bench-") as folder:
            path = Path(folder) / "chunks.jsonl"
            write_jsonl(path, args.rows, args.words, args.dim)
            for run in range(args.runs):
                for variant in (True, False) if run % 2 == 0 else (False, True):
                    name = f"{'' if variant else 'no'}{args.compare}{run}"
                    seconds, postings = load(conn, name, path, args.dim, variant, args.compare, dsn)
                    times[variant].append(seconds)
                    print(f"  {name}: {seconds:.1f}s, {postings:,} postings", flush=True)
                    if args.compare == "chunkidx":
                        churned[variant].append(churn(conn, name, args.rows, args.dim))
                        insert, update, delete = churned[variant][-1]
                        print(
                            f"    insert of a copy: {insert:.2f}s, text change of 10%: {update:.2f}s,"
                            f" delete of 10%: {delete:.2f}s",
                            flush=True,
                        )
    with_it, without = statistics.median(times[True]), statistics.median(times[False])
    what = {
        "fk": "the postings' foreign key",
        "df": "the words' document frequencies kept",
        "chunkidx": "the postings' chunk-id index (0017)",
    }[args.compare]
    print(
        f"{args.rows:,} chunks x {args.words} words, {args.dim}-d: ingest with {what} "
        f"{with_it:.1f}s, without {without:.1f}s (medians of {args.runs}): {with_it / without:.2f}x",
        flush=True,
    )
    for step, label in ((0, "insert of a copy (triggers alone)"), (1, "text change of 10%"), (2, "delete of 10%")):
        if churned[True]:
            on = statistics.median(s[step] for s in churned[True])
            off = statistics.median(s[step] for s in churned[False])
            print(f"  {label}: with {on:.2f}s, without {off:.2f}s: {on / off:.2f}x", flush=True)
    print(f"load average at end: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
