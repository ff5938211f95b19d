"""A ``ragstore mcp --transport http`` process on a free loopback port, and client sessions on it."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

RAGSTORE = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "ragstore"
STARTUP_SECONDS = 120.0  # a generous bound for a loaded machine; a healthy start takes about a second


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def http_server(dsn: str, *args: str) -> Iterator[str]:
    """``ragstore mcp --transport http`` on ``dsn`` with ``args``; yields its URL once it accepts connections."""
    port = free_port()
    env = {**os.environ, "RAGSTORE_DSN": dsn}
    command = [str(RAGSTORE), "mcp", "--transport", "http", "--port", str(port), *args]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"ragstore mcp exited {process.returncode}: {process.stderr.read() if process.stderr else ''}"
                )
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr:
            process.stderr.close()


@asynccontextmanager
async def client_session(url: str, token: str | None = None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    http: httpx2.AsyncClient = create_mcp_http_client(headers=headers)
    async with http, streamable_http_client(url, http_client=http) as streams, ClientSession(*streams) as client:
        await client.initialize()
        yield client


@asynccontextmanager
async def http_session(dsn: str, *args: str) -> AsyncIterator[ClientSession]:
    """A client session on a fresh HTTP server of ``dsn`` (as the DSN's role, no tokens)."""
    with http_server(dsn, *args) as url:
        async with client_session(url) as client:
            yield client
