"""Helpers several test modules share (once in serve/test_serve_process.py)."""

from __future__ import annotations

import socket
import subprocess
import time

import httpx
import pytest

from tests.toolkit.app import bearer, seeded, token  # noqa: F401 (the fixture)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def until(condition: object, what: str, proc: subprocess.Popen[bytes], attempts: int = 600) -> None:
    """Poll ``condition`` (a callable) every 0.1 s until true; fail naming ``what`` if the server exits first."""
    assert callable(condition)
    for _ in range(attempts):
        if condition():
            return
        if proc.poll() is not None:
            pytest.fail(f"ragstore serve exited ({proc.returncode}) before {what}")
        time.sleep(0.1)
    pytest.fail(f"never: {what}")


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.TransportError:
        return False
