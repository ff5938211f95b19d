"""The API served by a real uvicorn on a free 127.0.0.1 port, in a thread of the test process: the tests'
httpx clients speak HTTP over TCP to it, as any application would."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import uvicorn

from ragstore.serve.app import Settings, asgi_app


@contextlib.contextmanager
def serving(settings: Settings) -> Iterator[str]:
    """The base URL of ``settings``' app under uvicorn (its lifespan opened), stopped after the block as
    SIGTERM stops ``ragstore serve``: requests in flight are answered first."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    config = uvicorn.Config(
        asgi_app(settings), log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=60
    )
    server = uvicorn.Server(config)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(server.serve(sockets=[sock]))
        except BaseException as exc:  # reported to the test below
            failure.append(exc)

    thread = threading.Thread(target=run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not server.started:
        if failure or not thread.is_alive() or time.monotonic() > deadline:
            sock.close()
            raise RuntimeError(f"the test server did not start: {failure[:1] or 'it exited'}")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=120)
        sock.close()
