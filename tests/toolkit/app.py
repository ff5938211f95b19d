"""Helpers several test modules share (once in serve/test_app.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest

from ragstore import Store
from ragstore.serve import tokens
from ragstore.serve.app import MAX_BODY_BYTES, Settings
from tests.serve.live import serving
from tests.toolkit.chunks import records


@pytest.fixture
def seeded(dsn: str) -> str:
    with Store(dsn, pool_size=2) as store:
        store.create_family("docs", "offline")
        store.create_family("other", "offline")
        store.index(records(), "docs")
        store.index(records(), "other")
    return dsn


def token(dsn: str, role: str, name: str | None = None) -> str:
    with psycopg.connect(dsn) as conn:
        return tokens.create(conn, role, name).token


async def client_for(
    login_dsn: str, max_body: int = MAX_BODY_BYTES, **options: Any
) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client of the API served by uvicorn on 127.0.0.1 (tests/serve/live.py)."""
    with serving(Settings(dsn=login_dsn, pool_size=2, max_body=max_body, **options)) as base:
        async with httpx.AsyncClient(base_url=base, timeout=120) as client:
            yield client


@pytest.fixture
async def client(seeded: str) -> AsyncIterator[httpx.AsyncClient]:
    async for c in client_for(seeded):
        yield c


def bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}
