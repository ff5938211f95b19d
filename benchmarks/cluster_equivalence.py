"""One node against a local Citus cluster on a real corpus: the same tables, the same exact answers.

Runs the commands a user runs, in a temporary home, for each side:

    ragstore cluster start --workers 2 --json     (the cluster side; the single side uses the embedded server)
    ragstore migrate
    ragstore family create man --backend offline
    ragstore index man <corpus>

then compares, through the library: a content hash of the family's chunks and vectors (everything but
timestamps), and the exact-mode top 10 (ids and scores to 1e-6) of the first ``--queries`` queries of
``queries.jsonl`` beside the corpus (or of the corpus' own texts when there is none). Prints where
``citus_shards`` places the family's shards. Exit status 1 when anything differs.

    python benchmarks/cluster_equivalence.py                     # the manpages corpus, 50 queries
    python benchmarks/cluster_equivalence.py --corpus c.jsonl --queries 20
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
from typing import Any

import psycopg
from psycopg import sql

from ragstore.db.cluster import citus_available
from ragstore.db.connection import connect
from ragstore.families import get_family
from ragstore.search.api import search

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "manpages"
FAMILY = "man"


def ragstore(home: Path, *args: str, dsn: str | None = None) -> str:
    """Run one ragstore command as a user would; its output (stdout)."""
    env = {**os.environ, "RAGSTORE_HOME": str(home)}
    env.pop("RAGSTORE_DSN", None)
    if dsn:
        env["RAGSTORE_DSN"] = dsn
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "ragstore.cli", *args], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"ragstore {' '.join(args)} failed: {done.stderr.strip() or done.stdout.strip()}")
    print(f"  $ ragstore {' '.join(args)}   ({time.perf_counter() - started:.1f} s)")
    for line in done.stdout.strip().splitlines()[:3]:
        print(f"    {line}")
    return done.stdout


def digest(conn: psycopg.Connection[Any]) -> str:
    table = get_family(conn, FAMILY).table
    rows = conn.execute(
        sql.SQL(
            "SELECT c.chunk_id, c.package_path, c.text, c.metadata::text, c.content_sha256, e.embedding::text, "
            "e.model, e.package_path FROM ragstore.chunks c LEFT JOIN ragstore.{} e "
            "ON e.family = c.family AND e.chunk_id = c.chunk_id WHERE c.family = %s ORDER BY c.chunk_id"
        ).format(sql.Identifier(table)),
        (FAMILY,),
    ).fetchall()
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def answers(dsn: str, texts: list[str], k: int) -> tuple[str, int, list[list[tuple[str, float]]], float]:
    with connect(dsn) as conn:
        count = conn.execute("SELECT count(*) FROM ragstore.chunks WHERE family = %s", (FAMILY,)).fetchone()
        started = time.perf_counter()
        found = [[(h.chunk_id, round(h.score, 6)) for h in search(conn, FAMILY, t, mode="exact", k=k)] for t in texts]
        seconds = time.perf_counter() - started
        return digest(conn), int(count[0]) if count else 0, found, seconds


def query_texts(corpus: Path, n: int) -> list[str]:
    queries = corpus.parent / "queries.jsonl"
    source = queries if queries.exists() else corpus
    texts = []
    with source.open(encoding="utf-8") as lines:
        for line in lines:
            texts.append(str(json.loads(line)["text"])[:200])
            if len(texts) == n:
                break
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DATA / "corpus.jsonl", help="chunks JSONL to index")
    parser.add_argument("--queries", type=int, default=50, help="how many exact searches to compare")
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--home", type=Path, default=None, help="home folder (default: a new temporary one)")
    args = parser.parse_args()
    if not args.corpus.exists():
        raise SystemExit(f"no corpus at {args.corpus}: give --corpus")
    if not citus_available():
        raise SystemExit("Citus is not built into the embedded PostgreSQL: run scripts/build_citus.sh")
    home = args.home or Path(tempfile.mkdtemp(prefix="ragstore-equivalence-"))
    texts = query_texts(args.corpus, args.queries)
    print(f"corpus {args.corpus} ({sum(1 for _ in args.corpus.open())} lines), {len(texts)} queries, k={args.k}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    print("single node (embedded server):")
    single_home = home / "single"
    ragstore(single_home, "migrate")
    ragstore(single_home, "family", "create", FAMILY, "--backend", "offline")
    ragstore(single_home, "index", FAMILY, str(args.corpus))
    single_dsn = json.loads(ragstore(single_home, "server", "status", "--json"))["dsn"]

    print("Citus cluster (coordinator + 2 workers):")
    cluster_home = home / "cluster"
    try:
        dsn = json.loads(ragstore(cluster_home, "cluster", "start", "--workers", "2", "--json"))["dsn"]
        ragstore(cluster_home, "migrate", dsn=dsn)
        ragstore(cluster_home, "family", "create", FAMILY, "--backend", "offline", dsn=dsn)
        ragstore(cluster_home, "index", FAMILY, str(args.corpus), dsn=dsn)
        single = answers(single_dsn, texts, args.k)
        cluster = answers(dsn, texts, args.k)
        with psycopg.connect(dsn) as conn:
            table = get_family(conn, FAMILY).table
            placement = conn.execute(
                "SELECT n.nodename, n.nodeport, count(*), sum(s.shard_size) FROM citus_shards s "
                "JOIN pg_dist_node n ON n.nodename = s.nodename AND n.nodeport = s.nodeport "
                "WHERE s.table_name = %s::regclass GROUP BY 1, 2 ORDER BY 1",
                (f"ragstore.{table}",),
            ).fetchall()
    finally:
        ragstore(cluster_home, "cluster", "stop")
        ragstore(single_home, "server", "stop")

    same = sum(a == b for a, b in zip(single[2], cluster[2], strict=True))
    print(f"chunks: single {single[1]}, cluster {cluster[1]}")
    verdict = "same" if single[0] == cluster[0] else "DIFFERENT"
    print(f"content hash: single {single[0][:16]}..., cluster {cluster[0][:16]}... -> {verdict}")
    print(
        f"exact top {args.k}: {same}/{len(texts)} queries identical (ids and scores to 1e-6); "
        f"{single[3] * 1000 / len(texts):.1f} ms/query single, {cluster[3] * 1000 / len(texts):.1f} ms/query cluster"
    )
    print(f"citus_shards of ragstore.{table}:")
    for name, port, shards, size in placement:
        print(f"  {Path(name).parent.name} (port {port}): {shards} shards, {int(size or 0) // 1024} kB")
    ok = single[0] == cluster[0] and single[1] == cluster[1] and same == len(texts) and len(placement) == 2
    print("EQUIVALENT" if ok else "DIFFERENT")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
