"""What ``ragstore serve`` adds to a search, in-process: the app's own share of the HTTP overhead, by stage.

    python benchmarks/serve_profile.py [--dsn DSN] [--chunks 2000] [--queries 400] [--profile]

Creates a scratch database (``--dsn``, else ``$RAGSTORE_DSN``, else a throwaway embedded server), indexes
``--chunks`` synthetic chunks (offline backend, as ``benchmarks/serve.py``), makes a reader token, and
opens the app of ``ragstore serve`` in this process (its lifespan, its pools: no socket, no uvicorn). Then
each of ``--queries`` queries goes, in a rotating order, through:

- ``lib``: :meth:`AsyncStore.search` as the reader role (the same pool size), the baseline;
- ``check``: the token check alone (:meth:`Stores.role_of`: one lookup on the login's pool);
- ``asgi``: the app called as uvicorn calls it (a scope, the body, the answer collected), the token
  checked while the search runs (:meth:`Stores.speculate`);
- ``httpx``: the same app through httpx's ASGI transport (an in-process client's own Python on top).

Prints the p50/p95 of each and the differences to ``lib``, then the CPU time per call of each way run
alone (what a loaded machine's waiting for a core does not inflate); with ``--profile``, the functions the
``asgi`` path spends its CPU time in (cProfile on ``time.process_time``, ordered by ``--sort``), the
search's own share included, so the rest reads as the app's.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import statistics
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import orjson
import psycopg
from _db import admin_dsn, scratch_database
from serve import BENCH_APP, answer_key, chunks, pct, queries

from ragstore import AsyncStore, Store
from ragstore.serve import tokens
from ragstore.serve.app import Settings, create_app, role_dsn

PATH = "/v1/families/docs/search"


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def asgi_caller(app: Any, token: str) -> Callable[[bytes], Awaitable[tuple[int, bytes]]]:
    """A POST of ``body`` to the search path, as uvicorn hands the app a request (one body message)."""
    headers = [
        (b"host", b"127.0.0.1"),
        (b"authorization", f"Bearer {token}".encode()),
        (b"content-type", b"application/json"),
    ]

    async def post(body: bytes) -> tuple[int, bytes]:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": PATH,
            "raw_path": PATH.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [*headers, (b"content-length", str(len(body)).encode())],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8000),
            "state": {},
        }
        sent = False
        status = 0
        parts: list[bytes] = []

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                await asyncio.Event().wait()  # a disconnect is never sent: the request is whole
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body":
                parts.append(message.get("body", b""))

        await app(scope, receive, send)
        return status, b"".join(parts)

    return post


async def run(dsn: str, args: argparse.Namespace) -> None:
    with Store(dsn, pool_size=1, application_name=BENCH_APP) as store:
        store.create_family("docs", "offline")
        store.index(chunks(args.chunks, "c", seed=7), "docs")
    with psycopg.connect(dsn, application_name=BENCH_APP) as conn:
        conn.execute("ANALYZE")
        reader = tokens.create(conn, "ragstore_reader", "bench-reader").token
    app = create_app(Settings(dsn=dsn, pool_size=args.pool_size))
    stores = app.state.stores
    async with (
        app.router.lifespan_context(app),
        AsyncStore(role_dsn(dsn, "ragstore_reader"), pool_size=args.pool_size, application_name=BENCH_APP) as lib,
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app") as client,
    ):
        post = asgi_caller(app, reader)
        headers = {"Authorization": f"Bearer {reader}"}

        async def via_lib(query: str) -> Any:
            return answer_key([h.as_dict() for h in await lib.search("docs", query, k=args.k)])

        async def via_check(query: str) -> Any:
            return await stores.role_of(reader)

        async def via_asgi(query: str) -> Any:
            status, body = await post(orjson.dumps({"query": query, "k": args.k}))
            assert status == 200, body[:200]
            return answer_key(orjson.loads(body)["hits"])

        async def via_httpx(query: str) -> Any:
            answer = await client.post(PATH, json={"query": query, "k": args.k}, headers=headers)
            assert answer.status_code == 200, answer.text
            return answer_key(answer.json()["hits"])

        ways = [("lib", via_lib), ("check", via_check), ("asgi", via_asgi), ("httpx", via_httpx)]
        qs = queries(args.queries, seed=23)
        for query in qs[:20]:  # warm every path
            for _, way in ways:
                await way(query)
        times: dict[str, list[float]] = {name: [] for name, _ in ways}
        for n, query in enumerate(qs):
            got: dict[str, Any] = {}
            for name, way in ways[n % 4 :] + ways[: n % 4]:
                t = time.perf_counter()
                got[name] = await way(query)
                times[name].append((time.perf_counter() - t) * 1000)
            assert got["lib"] == got["asgi"] == got["httpx"], query
        print(f"{args.queries} queries, {args.chunks} chunks, k {args.k}, each way in a rotating order (ms):")
        lib50, lib95 = statistics.median(times["lib"]), pct(times["lib"], 0.95)
        for name, ms in times.items():
            p50, p95 = statistics.median(ms), pct(ms, 0.95)
            extra = "" if name in ("lib", "check") else f"  (over lib: p50 {p50 - lib50:+.3f}, p95 {p95 - lib95:+.3f})"
            print(f"  {name:6} p50 {p50:7.3f}  p95 {p95:7.3f}{extra}")
        print("CPU time per call, each way alone over the same queries (ms; waiting for a core excluded):")
        cpu: dict[str, float] = {}
        for name, way in ways:
            t = time.process_time()
            for query in qs:
                await way(query)
            cpu[name] = (time.process_time() - t) * 1000 / len(qs)
            extra = "" if name in ("lib", "check") else f"  (over lib: {cpu[name] - cpu['lib']:+.3f})"
            print(f"  {name:6} {cpu[name]:7.3f}{extra}")
        if args.profile:
            profiler = cProfile.Profile(time.process_time)  # CPU time: waiting for a core is not counted
            profiler.enable()
            for query in qs:
                await via_asgi(query)
            profiler.disable()
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats(args.sort).print_stats(args.top)
            print(out.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn")
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--pool-size", type=int, default=4)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--profile", action="store_true", help="cProfile the asgi path afterwards.")
    parser.add_argument("--top", type=int, default=45, help="Functions the profile lists.")
    parser.add_argument("--sort", default="cumulative", help="The profile's order: cumulative, tottime, ...")
    args = parser.parse_args()
    print(f"load before: {uptime()}")
    with admin_dsn(args.dsn) as admin, scratch_database(admin) as dsn:
        asyncio.run(run(dsn, args))
    print(f"load after: {uptime()}")


if __name__ == "__main__":
    main()
