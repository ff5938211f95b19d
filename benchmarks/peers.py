"""ragstore next to the Postgres vector stores of LangChain and LlamaIndex, on one server.

    python benchmarks/peers.py --rows 100000          # 100k x 384 (about 25 minutes on 2 cores)
    python benchmarks/peers.py --rows 20000           # a quicker run

Every store gets the same rows (random clustered 384-d vectors, metadata ``cat`` = row % 100 and ``grp``
= row % 10) through its documented bulk API and its default HNSW index, in a database of its own on one
PostgreSQL server (``--dsn``, else ``$RAGSTORE_DSN``, else a throwaway embedded server):

- ragstore: ``Store.index`` into an ``external`` family (index built at the end of the bulk load);
- langchain-postgres ``PGVectorStore``: ``add_embeddings`` in batches of 1,000, metadata columns ``cat`` and
  ``grp``, then ``apply_vector_index(HNSWIndex())``;
- llama-index-vector-stores-postgres ``PGVectorStore``: ``add`` in batches of 1,000 with its HNSW index
  (m 16, ef_construction 64, ef_search 40, cosine), as its documentation shows.

langchain-postgres pins pgvector < 0.4, which ragstore cannot share, so each peer runs in a virtual
environment of its own under /tmp (made on first use) through ``benchmarks/_peers_worker.py``. Each store
is loaded, then loaded again with the same rows (re-ingest), then answers the same queries, interleaved
(query by query, the stores in turn), unfiltered and under a 1% (``cat = 7``) and a 10% (``grp = 3``)
metadata filter. Recall@10 is against the exact top 10 computed with numpy; "hits" is the mean number of
results returned for k = 10. Latency is measured inside each worker around the one search call.

Before the stores, the same rows' physical limit is measured on the same server (``--no-limit`` skips it):
binary COPY into tables shaped like ragstore's, then the same HNSW build (benchmarks/ingest_precomputed.py
``physical_limit``). No writer that builds the same index can load faster, so "limit / peer" is the most
any store could be faster than that peer at loading.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._db import admin_dsn, scratch_database

WORKER = Path(__file__).resolve().parent / "_peers_worker.py"
VENVS = {
    "langchain": ("/tmp/ragstore-peers-langchain", ["langchain-postgres==0.0.19", "psycopg[binary]>=3.2", "numpy"]),
    "llamaindex": (
        "/tmp/ragstore-peers-llamaindex",
        ["llama-index-vector-stores-postgres==0.9.0", "psycopg2-binary", "asyncpg", "psycopg[binary]>=3.2", "numpy"],
    ),
}
FILTERS = ("none", "1%", "10%")


def venv_python(peer: str) -> str:
    """The peer's own interpreter, its venv made and filled on first use."""
    if peer == "ragstore":
        return sys.executable
    home, packages = VENVS[peer]
    python = Path(home) / "bin" / "python"
    if not python.exists():
        print(f"making {home} for {peer} (once)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", home], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *packages], check=True)
    return str(python)


def make_data(rows: int, queries: int, dim: int, seed: int = 7) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(100, dim)).astype(np.float32)
    vectors = centers[rng.integers(0, 100, rows)] + 0.5 * rng.normal(size=(rows, dim)).astype(np.float32)
    qs = centers[rng.integers(0, 100, queries)] + 0.5 * rng.normal(size=(queries, dim)).astype(np.float32)
    index = np.arange(rows)
    return {
        "vectors": vectors.astype(np.float32),
        "queries": qs.astype(np.float32),
        "cat": index % 100,
        "grp": index % 10,
    }


def exact_top10(data: dict[str, np.ndarray]) -> dict[str, list[set[str]]]:
    vectors = data["vectors"] / np.linalg.norm(data["vectors"], axis=1, keepdims=True)
    masks = {"none": np.ones(len(vectors), bool), "1%": data["cat"] == 7, "10%": data["grp"] == 3}
    truth: dict[str, list[set[str]]] = {}
    for name, mask in masks.items():
        ids = np.flatnonzero(mask)
        sims = vectors[ids] @ (data["queries"] / np.linalg.norm(data["queries"], axis=1, keepdims=True)).T
        top = np.argsort(-sims, axis=0, kind="stable")[:10].T
        truth[name] = [{f"r{ids[j]}" for j in row} for row in top]
    return truth


class Worker:
    def __init__(self, peer: str, dsn: str, data_path: str) -> None:
        self.peer = peer
        self.proc = subprocess.Popen(
            [venv_python(peer), str(WORKER), peer, dsn, data_path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(WORKER.parent.parent)} if peer == "ragstore" else None,
        )

    def ask(self, **cmd: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.peer} worker ended (exit {self.proc.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        try:
            self.ask(cmd="quit")
        except (RuntimeError, BrokenPipeError, ValueError):
            pass
        self.proc.wait(timeout=60)


def peer_database(admin: str) -> str:
    name = f"peers_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE template0").format(sql.Identifier(name)))
    dsn = make_conninfo(admin, dbname=name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return dsn


def as_url(dsn: str) -> str:
    """A conninfo as a postgresql:// URL (SQLAlchemy, which the peers use, takes URLs only)."""
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    host = str(params.get("host", "localhost"))
    port = params.get("port", 5432)
    user = params.get("user", "postgres")
    password = params.get("password")
    auth = f"{user}:{password}@" if password else f"{user}@"
    if host.startswith("/"):
        return f"postgresql://{auth}/{params['dbname']}?host={host}&port={port}"
    return f"postgresql://{auth}{host}:{port}/{params['dbname']}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--dsn", default=None)
    parser.add_argument("--peers", default="ragstore,langchain,llamaindex")
    parser.add_argument("--no-limit", action="store_true", help="skip the physical limit of the same rows")
    args = parser.parse_args()
    peers = args.peers.split(",")
    data = make_data(args.rows, args.queries, args.dim)
    truth = exact_top10(data)
    results: dict[str, dict[str, Any]] = {}
    with admin_dsn(args.dsn) as admin, tempfile.TemporaryDirectory() as tmp:
        data_path = str(Path(tmp) / "data.npz")
        np.savez(data_path, **data)
        if not args.no_limit:
            results["limit"] = {"ingest": physical_limit_of(admin, data)}
            print(f"physical limit: {args.rows / results['limit']['ingest']:,.0f} rows/s", file=sys.stderr, flush=True)
        with scratch_database(admin) as ragstore_dsn:
            workers = {}
            dropped: list[str] = []
            try:
                for peer in peers:
                    dsn = ragstore_dsn if peer == "ragstore" else peer_database(admin)
                    if peer != "ragstore":
                        dropped.append(dsn)
                    workers[peer] = Worker(peer, as_url(dsn) if peer != "ragstore" else dsn, data_path)
                for peer, worker in workers.items():  # loads one after another: each has the server alone
                    first = worker.ask(cmd="ingest")["seconds"]
                    rows_first = worker.ask(cmd="count")["rows"]
                    again = worker.ask(cmd="reingest")["seconds"]
                    rows_again = worker.ask(cmd="count")["rows"]
                    results[peer] = {"ingest": first, "rows": rows_first, "reingest": again, "rows_again": rows_again}
                    results[peer].update({f: {"ms": [], "recall": [], "hits": []} for f in FILTERS})
                    print(  # as soon as known: a run stopped later still leaves its loads on record
                        f"{peer}: loaded {rows_first:,} rows in {first:.1f}s, re-ingest {again:.1f}s, "
                        f"{rows_again:,} rows after it",
                        file=sys.stderr,
                        flush=True,
                    )
                for q in range(args.queries):  # interleaved: the same query on every store in turn
                    for f in FILTERS:
                        order = peers[q % len(peers) :] + peers[: q % len(peers)]
                        for peer in order:
                            answer = workers[peer].ask(cmd="query", q=q, filter=f)
                            got = answer["ids"]
                            cell = results[peer][f]
                            cell["ms"].append(1000 * answer["seconds"])
                            cell["hits"].append(len(got))
                            cell["recall"].append(len(set(got[:10]) & truth[f][q]) / 10)
            finally:
                for worker in workers.values():
                    worker.close()
                for dsn in dropped:
                    name = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
                    with psycopg.connect(admin, autocommit=True) as conn:
                        conn.execute(
                            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(str(name)))
                        )
    print(report(results, args.rows, args.dim, args.queries))


class LimitRows:
    """The peers' rows in the shape ``ingest_precomputed.physical_limit`` reads (ids, packages, texts, vectors)."""

    def __init__(self, data: dict[str, np.ndarray]) -> None:
        self.n = len(data["vectors"])
        self.ids = [f"r{i}" for i in range(self.n)]
        self.packages = [f"doc{i // 10}" for i in range(self.n)]
        self.texts = [f"row {i} of document {i // 10}" for i in range(self.n)]
        self.vectors = data["vectors"]


def physical_limit_of(admin: str, data: dict[str, np.ndarray]) -> float:
    """Seconds for binary COPY of the rows plus the same HNSW build, in a scratch database of its own."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # ingest_precomputed imports its sibling _db
    from ingest_precomputed import physical_limit

    from ragstore.db.connection import connect
    from ragstore.embed.external import ExternalBackend
    from ragstore.families import create_family

    dim = int(data["vectors"].shape[1])
    with scratch_database(admin) as dsn, connect(dsn) as conn:
        create_family(conn, "limit", ExternalBackend("bench", dim), options={"dimensions": dim})
        return physical_limit(conn, LimitRows(data))  # type: ignore[arg-type]


def report(results: dict[str, dict[str, Any]], rows: int, dim: int, queries: int) -> str:
    limit = results.pop("limit", None)
    base = results.get("ragstore")
    lines = [
        f"peers: {rows:,} rows x {dim}-d, {queries} queries per filter, k = 10, one server, interleaved",
        "",
        "| store | first load rows/s | re-ingest s | rows after load / re-ingest | filter | recall@10 | hits "
        "| p50 ms | p95 ms |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for peer, r in results.items():
        for i, f in enumerate(FILTERS):
            ms = np.asarray(r[f]["ms"])
            head = (
                f"| {peer} | {rows / r['ingest']:,.0f} | {r['reingest']:.1f} | {r['rows']:,} / {r['rows_again']:,}"
                if i == 0
                else "| | | | "
            )
            lines.append(
                f"{head} | {f} | {np.mean(r[f]['recall']):.3f} | {np.mean(r[f]['hits']):.1f} | "
                f"{np.percentile(ms, 50):.2f} | {np.percentile(ms, 95):.2f} |"
            )
    if base is not None:
        lines += ["", "ratios (peer / ragstore): load time, re-ingest time, p50 unfiltered / 1% / 10%"]
        for peer, r in results.items():
            if peer == "ragstore":
                continue
            p50 = [float(np.median(r[f]["ms"]) / np.median(base[f]["ms"])) for f in FILTERS]
            lines.append(
                f"- {peer}: load {r['ingest'] / base['ingest']:.2f}x, "
                f"re-ingest {r['reingest'] / base['reingest']:.2f}x, "
                f"p50 {p50[0]:.2f}x / {p50[1]:.2f}x / {p50[2]:.2f}x"
            )
    if limit is not None:
        lines += [
            "",
            f"physical limit (binary COPY of the same rows + the same HNSW build): {limit['ingest']:.1f}s, "
            f"{rows / limit['ingest']:,.0f} rows/s; limit / store load time (the most a writer could gain):",
        ]
        lines += [f"- {peer}: {r['ingest'] / limit['ingest']:.2f}x" for peer, r in results.items()]
    return "\n".join(lines)


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"\n(total {time.perf_counter() - started:.0f}s)", file=sys.stderr)
