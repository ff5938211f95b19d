"""Where the server's time goes in a bulk load of chunks: the chunk table's COPY against its triggers' parts.

Loads SIZE chunks (``ingest_precomputed.Data``'s texts: six words of 14 and a number, so about 7 postings
per chunk and one new word per chunk) into one family of a fresh database as the streamed first load
does: binary COPY of batches of 5,000 rows (package order within a batch) into ragstore.chunks, one
transaction. For each VARIANT of the insert trigger it prints the wall time, the CPU time of the server
backend (from /proc/<pid>/stat, so the server must run on this machine: the default throwaway embedded
server does), the WAL written, and digests of the postings, word counts and ledger (variants that keep
them must agree with ``shipped``). Variants (all but ``shipped`` are diagnostics, never a product setting):

* ``shipped``: the triggers as migrated;
* ``no-trigger``: the insert trigger disabled (no postings, counts or ledger);
* ``empty``: an insert trigger that does nothing (the cost of its transition table);
* ``terms``: the trigger only extracts the postings (``ragstore.tsv_terms``), writes nothing;
* ``postings``: the trigger writes the postings only (no word counts, no ledger);
* ``postings-no-key``: the same into a table without its primary key (the heap alone);
* ``sorted``: the shipped trigger with the postings inserted in primary-key order.

Rounds run the variants interleaved (the shared machine's speed drifts by tens of percent over minutes).

    python benchmarks/ingest_server_profile.py --rows 100000 --rounds 3
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time
from pathlib import Path

from _db import admin_dsn, scratch_database
from ingest_precomputed import Data

from ragstore.db.connection import connect
from ragstore.embed.external import ExternalBackend
from ragstore.families import create_family

BATCH = 5000
TICK = os.sysconf("SC_CLK_TCK")
_TRIGGER = """
CREATE OR REPLACE FUNCTION ragstore.chunks_count_inserted() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, ragstore AS $fn$
DECLARE x bigint;
BEGIN
    {body};
    RETURN NULL;
END
$fn$"""
_POSTINGS = """INSERT INTO ragstore.chunk_terms (family, chunk_id, lexeme, tf, dl)
    SELECT n.family, n.chunk_id, t.lexeme, t.tf, t.dl
    FROM new_rows AS n CROSS JOIN LATERAL ragstore.tsv_terms(n.tsv) AS t"""
VARIANTS: dict[str, list[str]] = {
    "shipped": [],
    "no-trigger": ["ALTER TABLE ragstore.chunks DISABLE TRIGGER chunks_count_insert"],
    "empty": [_TRIGGER.format(body="x := 0")],
    "terms": [
        _TRIGGER.format(
            body="SELECT count(*) INTO x FROM new_rows AS n CROSS JOIN LATERAL ragstore.tsv_terms(n.tsv) AS t"
        )
    ],
    "postings": [_TRIGGER.format(body=_POSTINGS)],
    "postings-no-key": [
        _TRIGGER.format(body=_POSTINGS),
        "ALTER TABLE ragstore.chunk_terms DROP CONSTRAINT chunk_terms_pkey",
    ],
    "sorted": ["sorted"],  # the shipped definition with ORDER BY the postings' key, made at run time
}


def backend_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def sorted_shipped(conn) -> str:
    """The shipped insert trigger function with its postings inserted in (family, lexeme, chunk_id) order."""
    text = conn.execute("SELECT pg_get_functiondef('ragstore.chunks_count_inserted()'::regprocedure)").fetchone()[0]
    marker = "ragstore.tsv_terms(n.tsv) AS t\n"
    assert marker in text, "the shipped insert trigger no longer has the expected shape"
    return text.replace(marker, marker.rstrip("\n") + " ORDER BY n.family, t.lexeme, n.chunk_id\n", 1)


def one_load(admin: str, data: Data, content: list[bytes], variant: str) -> str:
    with scratch_database(admin) as dsn, connect(dsn) as conn:
        create_family(conn, "f", ExternalBackend("bench", 4), options={"dimensions": 4})
        fts = conn.execute("SELECT 'english'::regconfig::oid").fetchone()[0]
        for statement in VARIANTS[variant]:
            conn.execute(sorted_shipped(conn) if statement == "sorted" else statement)
        conn.commit()
        pid = conn.info.backend_pid
        wal0 = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
        cpu0, started = backend_cpu(pid), time.perf_counter()
        with conn.cursor() as cur:
            for start in range(0, data.n, BATCH):
                rows = sorted(range(start, min(data.n, start + BATCH)), key=lambda i: (data.packages[i], data.ids[i]))
                with cur.copy(
                    "COPY ragstore.chunks (family, chunk_id, package_path, text, content_sha256, record_sha256,"
                    " metadata, fts_config, source_sha256) FROM STDIN (FORMAT BINARY)"
                ) as copy:
                    copy.set_types(["text", "text", "text", "text", "bytea", "bytea", "jsonb", "oid", "bytea"])
                    for i in rows:
                        row = ("f", data.ids[i], data.packages[i], data.texts[i], content[i], content[i], {}, fts)
                        copy.write_row((*row, content[i]))
        conn.commit()
        wall, cpu = time.perf_counter() - started, backend_cpu(pid) - cpu0
        wal = conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s) / 1e6", (wal0,)).fetchone()[0]
        postings, words, ledger, key_mb = conn.execute(
            "SELECT (SELECT md5(string_agg(concat_ws('/', lexeme, chunk_id, tf, dl), ',' ORDER BY lexeme, chunk_id))"
            "        FROM ragstore.chunk_terms),"
            " (SELECT md5(string_agg(lexeme || '/' || df, ',' ORDER BY lexeme)) FROM ragstore.chunk_term_df),"
            " (SELECT sum(delta) || '/' || sum(tokens) FROM ragstore.family_chunk_deltas),"
            " coalesce(pg_relation_size(to_regclass('ragstore.chunk_terms_pkey')), 0) / 1e6"
        ).fetchone()
    digest = f"{(postings or '-')[:8]} {(words or '-')[:8]} {ledger or '-'}"
    return (
        f"  {variant:16} wall {wall:6.2f}s  backend CPU {cpu:6.2f}s  WAL {wal:5.0f} MB  postings key {key_mb:5.1f} MB"
        f"  [{digest}]  load {os.getloadavg()[0]:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of: {', '.join(VARIANTS)}")
    args = parser.parse_args()
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s): {', '.join(unknown)}")
    data = Data(args.rows, 4)
    content = [hashlib.sha256(t.encode()).digest() for t in data.texts]
    print(f"{args.rows:,} chunks in batches of {BATCH:,}; load average at start: {os.getloadavg()}", flush=True)
    with admin_dsn() as admin:
        for round_ in range(1, args.rounds + 1):
            print(f"round {round_}:", flush=True)
            for variant in variants:
                print(one_load(admin, data, content, variant), flush=True)
    print(f"load average at end: {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
