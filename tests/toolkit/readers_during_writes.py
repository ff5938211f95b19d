"""Helpers several test modules share (once in reliability/test_readers_during_writes.py)."""

from __future__ import annotations

import json
import math
import os
import random
import re
import time
from pathlib import Path
from typing import Any

import psycopg

from ragstore.caches import caches_for
from ragstore.db.connection import connect
from ragstore.families.migrate import DROP_LOCK_TIMEOUT

K = 10


MODES = ("auto", "exact", "hybrid")


PAUSE = 0.005  # between two searches of a reader: continuous, without two spinning readers owning both cores


READER_LOCK_TIMEOUT_MS = 10 * int(DROP_LOCK_TIMEOUT.removesuffix("ms"))


APP = "ragstore-test-reader"


ID = re.compile(r"doc-(\d{6})")


def _problems(hits: list[Any]) -> list[str]:
    """What is wrong with one answer: partial, duplicated, unordered, or a hit that is not its chunk."""
    out = [] if len(hits) == K else [f"{len(hits)} hits, not {K}"]
    ids = [h.chunk_id for h in hits]
    if len(set(ids)) != len(ids):
        out.append(f"duplicate ids {ids}")
    scores = [h.score for h in hits]
    if not all(isinstance(s, float) and math.isfinite(s) for s in scores):
        out.append(f"bad scores {scores}")
    elif scores != sorted(scores, reverse=True):
        out.append(f"unordered scores {scores}")
    for h in hits:
        m = ID.fullmatch(h.chunk_id) if isinstance(h.chunk_id, str) else None
        i = int(m.group(1)) if m else -1
        if not m or h.package_path != f"pkg/{i // 100:03d}.md" or not re.match(rf"chunk {i} v\d+: ", h.text):
            out.append(f"malformed hit {h.chunk_id!r} {h.package_path!r} {h.text[:30]!r}")
    return out


def _as_reader(conn: psycopg.Connection[Any]) -> None:
    """Mark ``conn`` a reader: the name the blocking monitor looks for, and the reader's lock_timeout."""
    conn.execute(f"SET application_name = '{APP}'")
    conn.execute(f"SET lock_timeout = '{READER_LOCK_TIMEOUT_MS}ms'")  # a longer lock wait is an error
    if not conn.autocommit:
        conn.commit()  # the session settings outlive the rollback after each search


def _reader(dsn: str, out: str, stop: str, ready: str, seed: int, autocommit: bool) -> None:
    """Search family docs until ``stop`` exists; write one record per search to ``out`` (JSON)."""
    from ragstore.search import api

    rng = random.Random(seed)
    records: list[list[Any]] = []
    with connect(dsn, autocommit=autocommit) as conn:
        _as_reader(conn)
        n = 0
        while not os.path.exists(stop):
            mode = MODES[n % len(MODES)]
            n += 1
            text = f"w{rng.randrange(5003)} w{rng.randrange(5003)} chunk"
            started = time.monotonic()
            clock = time.perf_counter()
            hits: list[Any] = []
            error = None
            try:
                hits = api.search(conn, "docs", text, k=K, mode=mode)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
            seconds = time.perf_counter() - clock
            if not autocommit:
                conn.rollback()
            # The family the answer came from (the search layer remembers it per connection), "?" if unknown.
            served = caches_for(conn).family("docs")
            model = served.model if served is not None and error is None else "?"
            got = [f"{h.chunk_id}:{h.text.split(':', 1)[0].rsplit('v', 1)[-1]}" for h in hits]
            records.append([started, seconds, mode, model, error, _problems(hits) if error is None else [], got])
            if n == 1:
                Path(ready).touch()
            time.sleep(PAUSE)
    Path(out).write_text(json.dumps(records), encoding="utf-8")
