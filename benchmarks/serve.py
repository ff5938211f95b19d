"""``ragstore serve`` under load: concurrent HTTP searches while an index runs, against the library.

    python benchmarks/serve.py [--dsn DSN] [--chunks 20000] [--clients 64] [--searches 200] [--pool-size 4]

Creates a scratch database (``--dsn``, else ``$RAGSTORE_DSN``, else a throwaway embedded server), indexes
``--chunks`` synthetic chunks into family ``docs`` (offline backend), makes a reader and an app token and
starts ``ragstore serve`` as a subprocess on a free 127.0.0.1 port. Then, in one run:

1. the quiet overhead: ``--overhead`` queries, each sent over HTTP by httpx (one keep-alive client), over
   HTTP by a minimal raw HTTP/1.1 client (one keep-alive connection: what a client in C costs), and
   through an in-process :class:`~ragstore.AsyncStore` (same pool size, same reader role), in a rotating
   order, the three answers checked equal; p50/p95 of each and the differences, and the CPU time the
   server process used per HTTP request meanwhile (/proc);
2. the load: ``--clients`` concurrent HTTP clients (each its own connection) × ``--searches`` searches
   (queries drawn from a fixed set), while another client keeps indexing batches into family
   ``incoming`` over HTTP with the app token. Counts errors (any non-200 or transport failure), answers
   that differ from the library's for the same query (chunk ids and scores), and samples
   ``pg_stat_activity`` every 20 ms for the server's connections, against the most its pools may open.

Prints one block of figures, and the ``uptime`` load before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import psycopg
from _db import admin_dsn, scratch_database

from ragstore import AsyncStore, Store
from ragstore.serve import tokens
from ragstore.serve.app import role_dsn

WORDS = (
    "copy move delete archive index vector query cache latency budget review release schema rollback "
    "deploy build test parser token pool server client family chunk search hybrid filter score rank"
).split()
BENCH_APP = "ragstore-bench"  # the benchmark's own connections, left out of the server's count
LOGIN_POOL = 2 + 1  # the server's login AsyncStore: pool 2, worker pool 1 (ragstore/serve/app.py)
WORKER_POOL = 2  # each role's AsyncStore worker pool (AsyncStore's default worker_pool_size)


def chunks(n: int, prefix: str, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [
        {
            "chunk_id": f"{prefix}{i:07d}",
            "package_path": f"pkg{i % 40}/doc{i % 400}.md",
            "text": " ".join(rng.choices(WORDS, k=24)) + f" item {i}",
            "metadata": {"lang": "en" if i % 2 else "de"},
        }
        for i in range(n)
    ]


def queries(n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.sample(WORDS, 3)) for _ in range(n)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def answer_key(hits: list[dict[str, Any]]) -> list[tuple[str, float]]:
    return [(h["chunk_id"], h["score"]) for h in hits]


async def server_connections(dsn: str, stop: asyncio.Event, seen: list[int]) -> None:
    """Sample the server's connections (not this script's) into ``seen`` until ``stop``."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True, application_name=BENCH_APP) as conn:
        while not stop.is_set():
            cursor = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND backend_type = 'client backend' AND application_name = 'ragstore'"
            )
            row = await cursor.fetchone()
            seen.append(int(row[0]) if row else 0)
            await asyncio.sleep(0.02)


class RawClient:
    """A minimal HTTP/1.1 keep-alive client: each request one write, the answer read by its Content-Length.
    What a client costs in C (curl, Go's net/http), next to httpx's own Python per request."""

    def __init__(self, base: str, token: str) -> None:
        self.host, _, port = base.removeprefix("http://").partition(":")
        self.port = int(port)
        self.head = f"Host: {self.host}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> RawClient:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.writer is not None:
            self.writer.close()
            await self.writer.wait_closed()

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        assert self.reader is not None and self.writer is not None
        request = f"POST {path} HTTP/1.1\r\n{self.head}Content-Length: {len(body)}\r\n\r\n".encode() + body
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        fields = (line.partition(":") for line in lines[1:])
        length = next(int(value) for name, _, value in fields if name.lower() == "content-length")
        return int(lines[0].split(" ", 2)[1]), await self.reader.readexactly(length)


def cpu_seconds(pid: int) -> float:
    """The CPU time (user + system) process ``pid`` has used so far, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def overhead(base: str, reader: str, store: AsyncStore, qs: list[str], k: int, server: int) -> dict[str, float]:
    """Each query through httpx, through the raw client and through ``store``, in a rotating order (none
    always first), each answer checked against the library's; and the CPU time the server process
    ``server`` used per HTTP request meanwhile (what a loaded machine's waiting does not inflate)."""
    times: dict[str, list[float]] = {"httpx": [], "raw": [], "lib": []}
    headers = {"Authorization": f"Bearer {reader}"}
    path = "/v1/families/docs/search"
    async with (
        httpx.AsyncClient(base_url=base, timeout=120, headers=headers) as client,
        RawClient(base, reader) as raw,
    ):

        async def via_httpx(query: str) -> list[tuple[str, float]]:
            answer = await client.post(path, json={"query": query, "k": k})
            assert answer.status_code == 200, answer.text
            return answer_key(answer.json()["hits"])

        async def via_raw(query: str) -> list[tuple[str, float]]:
            status, body = await raw.post(path, orjson.dumps({"query": query, "k": k}))
            assert status == 200, body[:200]
            return answer_key(orjson.loads(body)["hits"])

        async def via_lib(query: str) -> list[tuple[str, float]]:
            return answer_key([h.as_dict() for h in await store.search("docs", query, k=k)])

        ways = [("httpx", via_httpx), ("raw", via_raw), ("lib", via_lib)]
        for query in qs[:20]:  # warm every path (pools, caches, the role's store)
            for _, way in ways:
                await way(query)
        cpu = cpu_seconds(server)
        for n, query in enumerate(qs):
            answers = []
            for name, way in ways[n % 3 :] + ways[: n % 3]:
                t = time.perf_counter()
                answer = await way(query)  # the answer's JSON decoding is on the clock of every path
                times[name].append((time.perf_counter() - t) * 1000)
                answers.append(answer)
            assert answers[0] == answers[1] == answers[2], query
        cpu = cpu_seconds(server) - cpu
        lib_cpu = time.process_time()  # the same searches through the library alone: its CPU per search
        for query in qs:
            await via_lib(query)
        lib_cpu = time.process_time() - lib_cpu
    stats = {f"{name}_{q}": f(ms) for name, ms in times.items() for q, f in (("p50", statistics.median), ("p95", p95))}
    return {**stats, "server_cpu_ms": cpu * 1000 / (2 * len(qs)), "lib_cpu_ms": lib_cpu * 1000 / len(qs)}


def p95(samples: list[float]) -> float:
    return pct(samples, 0.95)


async def load(
    base: str, reader: str, app: str, expected: dict[str, list[tuple[str, float]]], args: argparse.Namespace
) -> dict[str, Any]:
    qs = list(expected)
    errors: list[str] = []
    mismatches = 0
    latencies: list[float] = []
    stop_index = asyncio.Event()
    indexed = 0
    index_errors: list[str] = []

    async def one_client(n: int) -> None:
        nonlocal mismatches
        rng = random.Random(n)
        headers = {"Authorization": f"Bearer {reader}"}
        async with httpx.AsyncClient(base_url=base, timeout=300, headers=headers) as client:
            for _ in range(args.searches):
                query = rng.choice(qs)
                t = time.perf_counter()
                try:
                    answer = await client.post("/v1/families/docs/search", json={"query": query, "k": args.k})
                except httpx.HTTPError as exc:
                    errors.append(repr(exc))
                    continue
                latencies.append((time.perf_counter() - t) * 1000)
                if answer.status_code != 200:
                    errors.append(f"{answer.status_code} {answer.text[:200]}")
                elif answer_key(answer.json()["hits"]) != expected[query]:
                    mismatches += 1

    async def indexer() -> None:
        nonlocal indexed
        headers = {"Authorization": f"Bearer {app}"}
        batch = 0
        async with httpx.AsyncClient(base_url=base, timeout=300, headers=headers) as client:
            while not stop_index.is_set():
                records = chunks(args.index_batch, f"n{batch:05d}-", seed=1000 + batch)
                answer = await client.post("/v1/families/incoming/chunks", json={"records": records})
                if answer.status_code == 200:
                    indexed += int(answer.json()["inserted"])
                else:
                    index_errors.append(f"{answer.status_code} {answer.text[:200]}")
                batch += 1

    index_task = asyncio.create_task(indexer())
    await asyncio.sleep(0.5)  # the index is running before the first search
    t0 = time.perf_counter()
    await asyncio.gather(*(one_client(n) for n in range(args.clients)))
    wall = time.perf_counter() - t0
    stop_index.set()
    await index_task
    return {
        "searches": len(latencies) + sum(1 for e in errors if not e[:3].isdigit()),
        "errors": errors,
        "mismatches": mismatches,
        "p50": statistics.median(latencies),
        "p95": pct(latencies, 0.95),
        "rate": len(latencies) / wall,
        "wall": wall,
        "indexed": indexed,
        "index_errors": index_errors,
    }


def wait_healthy(base: str, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(1200):
        if proc.poll() is not None:
            raise SystemExit(f"ragstore serve exited with {proc.returncode}")
        try:
            if httpx.get(f"{base}/healthz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise SystemExit("ragstore serve did not answer /healthz")


async def run(dsn: str, args: argparse.Namespace) -> None:
    with Store(dsn, pool_size=1, application_name=BENCH_APP) as store:
        store.create_family("docs", "offline")
        store.create_family("incoming", "offline")
        store.index(chunks(args.chunks, "c", seed=7), "docs")
    with psycopg.connect(dsn, application_name=BENCH_APP) as conn:
        conn.execute("ANALYZE")
        reader = tokens.create(conn, "ragstore_reader", "bench-reader").token
        app = tokens.create(conn, "ragstore_app", "bench-app").token
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "ragstore.cli", "--dsn", dsn, "serve", "--port", str(port)]
    command += ["--pool-size", str(args.pool_size)]
    env = {**os.environ, "RAGSTORE_HOME": tempfile.mkdtemp(prefix="ragstore-serve-bench-")}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_healthy(base, proc)
        lib = AsyncStore(role_dsn(dsn, "ragstore_reader"), pool_size=args.pool_size, application_name=BENCH_APP)
        async with lib:
            qs = queries(args.queries)
            expected = {q: answer_key([h.as_dict() for h in await lib.search("docs", q, k=args.k)]) for q in qs}
            quiet = await overhead(base, reader, lib, queries(args.overhead, seed=23), args.k, proc.pid)
        stop = asyncio.Event()
        seen: list[int] = []
        sampler = asyncio.create_task(server_connections(dsn, stop, seen))
        loaded = await load(base, reader, app, expected, args)
        stop.set()
        await sampler
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    bound = LOGIN_POOL + 2 * (args.pool_size + WORKER_POOL)  # two token roles: reader and app
    print(f"clients x searches: {args.clients} x {args.searches}, {args.chunks} chunks, k {args.k}")
    print(f"errors: {len(loaded['errors'])}  answers unequal to the library's: {loaded['mismatches']}")
    for line in loaded["errors"][:5]:
        print(f"  error: {line}")
    print(
        f"under load: {loaded['rate']:.0f} searches/s, p50 {loaded['p50']:.2f} ms, p95 {loaded['p95']:.2f} ms;"
        f" {loaded['indexed']} chunks indexed meanwhile ({len(loaded['index_errors'])} index errors)"
    )
    print(
        f"server connections: max {max(seen)} (samples {len(seen)}), bound {bound}"
        f" = login {LOGIN_POOL} + 2 roles x (pool {args.pool_size} + workers {WORKER_POOL})"
    )
    print(
        f"quiet, {args.overhead} queries, each through the three in a rotating order:"
        f" AsyncStore.search p50 {quiet['lib_p50']:.2f} / p95 {quiet['lib_p95']:.2f} ms"
    )
    for name, what in (("httpx", "httpx client"), ("raw", "raw HTTP/1.1 client")):
        print(
            f"  HTTP, {what}: p50 {quiet[name + '_p50']:.2f} / p95 {quiet[name + '_p95']:.2f} ms;"
            f" overhead p50 {quiet[name + '_p50'] - quiet['lib_p50']:.2f} ms,"
            f" p95 {quiet[name + '_p95'] - quiet['lib_p95']:.2f} ms"
        )
    print(
        f"  CPU time per search: the server process {quiet['server_cpu_ms']:.2f} ms per HTTP request (uvicorn,"
        f" the app, the token check, the search's client side), the library alone {quiet['lib_cpu_ms']:.2f} ms;"
        f" the server's own {quiet['server_cpu_ms'] - quiet['lib_cpu_ms']:.2f} ms"
    )
    if "Traceback" in err.decode(errors="replace"):
        print("the server logged a traceback:\n" + err.decode(errors="replace")[-2000:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("RAGSTORE_DSN"))
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--searches", type=int, default=200, help="Searches per client.")
    parser.add_argument("--queries", type=int, default=100, help="Distinct queries the clients draw from.")
    parser.add_argument("--overhead", type=int, default=400, help="Queries of the quiet overhead phase.")
    parser.add_argument("--pool-size", type=int, default=4)
    parser.add_argument("--index-batch", type=int, default=200)
    parser.add_argument("-k", type=int, default=10)
    args = parser.parse_args()
    print(f"load before: {uptime()}")
    with admin_dsn(args.dsn) as admin, scratch_database(admin) as dsn:
        asyncio.run(run(dsn, args))
    print(f"load after: {uptime()}")


if __name__ == "__main__":
    main()
