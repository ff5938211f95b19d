"""Helpers several test modules share (once in integration/test_sync.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from psycopg import sql

from ragstore.embed.offline import OfflineBackend

BODIES = {1: "tar stores archives of directories", 2: "gzip compresses one stream", 3: "rsync copies files over ssh"}


def make_table(conn: Any, name: str = "docs", rows: dict[int, str] = BODIES) -> None:
    conn.execute(
        sql.SQL("CREATE TABLE public.{} (id int PRIMARY KEY, title text, body text, views int DEFAULT 0)").format(
            sql.Identifier(name)
        )
    )
    for key, body in rows.items():
        conn.execute(
            sql.SQL("INSERT INTO public.{} (id, title, body) VALUES (%s, %s, %s)").format(sql.Identifier(name)),
            (key, f"title {key}", body),
        )
    conn.commit()


def queued(conn: Any) -> list[str]:
    keys = [str(r[0]) for r in conn.execute("SELECT key FROM ragstore.sync_queue ORDER BY key")]
    conn.commit()
    return keys


def chunk_ids(conn: Any, family: str = "docs") -> list[str]:
    ids = [
        str(r[0]) for r in conn.execute("SELECT chunk_id FROM ragstore.chunks WHERE family = %s ORDER BY 1", (family,))
    ]
    conn.commit()
    return ids


class Counting:
    """The offline backend, counting each text it embeds (shared by threads)."""

    def __init__(self) -> None:
        self.inner = OfflineBackend()
        self.name, self.model, self.dim = self.inner.name, self.inner.model, self.inner.dim
        self.texts: list[str] = []
        self.lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> Any:
        with self.lock:
            self.texts.extend(texts)
        return self.inner.embed(texts)


def wait_for(condition: Any, most: float = 50.0) -> bool:
    """Whether ``condition()`` became true within ``most`` seconds (a bound for a stuck worker, not a goal)."""
    deadline = time.monotonic() + most
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False
