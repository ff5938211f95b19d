"""Helpers several test modules share (once in serve/test_app.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import psycopg
import pytest

from ragstore import Store
from ragstore.serve import tokens
from ragstore.serve.app import MAX_BODY_BYTES, BodyLimit, Settings, create_app
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


async def client_for(login_dsn: str, max_body: int = MAX_BODY_BYTES) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(dsn=login_dsn, pool_size=2, max_body=max_body))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=BodyLimit(app, max_body))
        async with httpx.AsyncClient(transport=transport, base_url="http://ragstore.test") as client:
            yield client


@pytest.fixture
async def client(seeded: str) -> AsyncIterator[httpx.AsyncClient]:
    async for c in client_for(seeded):
        yield c


def bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}
