"""What the reliability scenarios share: table checksums, corpus files and the CLI in a subprocess."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Self

import psycopg
from psycopg import sql

RAGSTORE = str(Path(sys.executable).parent / "ragstore")
_TIME_TYPES = {"timestamp with time zone", "timestamp without time zone", "date", "time without time zone"}


def ragstore_tables(conn: psycopg.Connection[Any]) -> list[str]:
    rows = conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'ragstore' AND c.relkind IN ('r', 'p') ORDER BY c.relname"
    ).fetchall()
    return [r[0] for r in rows]


def table_hashes(dsn: str, *, with_time: bool = True, skip: Iterable[str] = ()) -> dict[str, str]:
    """SHA-256 of the full content of every table in schema ragstore, rows in a canonical order (for the
    chunk-count ledger ``family_chunk_deltas``, each family's net count).

    ``with_time=False`` leaves out timestamp columns, so two runs made at different moments compare equal.
    """
    skipped = set(skip)
    out: dict[str, str] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in ragstore_tables(conn):
            if table in skipped:
                continue
            if table == "family_chunk_deltas":
                # An append-only ledger of chunk-count changes: what it means is each family's net count
                # (a killed and rerun index appends other rows for the same counts).
                net = conn.execute(
                    "SELECT family || ':' || sum(delta) FROM ragstore.family_chunk_deltas "
                    "GROUP BY family HAVING sum(delta) <> 0"
                )
                out[table] = hashlib.sha256("\n".join(sorted(r[0] for r in net)).encode()).hexdigest()
                continue
            cols = [
                name
                for name, kind in conn.execute(
                    "SELECT column_name, data_type FROM information_schema.columns "
                    "WHERE table_schema = 'ragstore' AND table_name = %s ORDER BY ordinal_position",
                    (table,),
                )
                if with_time or kind not in _TIME_TYPES
            ]
            row_text = sql.SQL("ROW({})::text").format(sql.SQL(", ").join(sql.Identifier(c) for c in cols))
            query = sql.SQL("SELECT {row} FROM ragstore.{table}").format(row=row_text, table=sql.Identifier(table))
            lines = sorted(r[0] for r in conn.execute(query))
            out[table] = hashlib.sha256("\n".join(lines).encode()).hexdigest()
    return out


def data_hashes(dsn: str) -> dict[str, str]:
    """Table hashes to compare runs made at different times (no timestamps, no migration history)."""
    return table_hashes(dsn, with_time=False, skip={"alembic_version", "applied_files"})


def reset_data(dsn: str) -> None:
    """Empty the chunk, family and cache tables (not the registry, the migration history or memory)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        # The memory stores are append-only by design (TRUNCATE refused): the scenarios never write them.
        keep = {"families", "alembic_version", "applied_files"}
        tables = [t for t in ragstore_tables(conn) if t not in keep and not t.startswith("memory")]
        conn.execute(
            sql.SQL("TRUNCATE {} CASCADE").format(sql.SQL(", ").join(sql.Identifier("ragstore", t) for t in tables))
        )


def chunk(i: int, version: int = 0) -> dict[str, Any]:
    """Chunk ``i``: distinct text per id (and per version), a package of 100 chunks, some metadata."""
    return {
        "chunk_id": f"doc-{i:06d}",
        "package_path": f"pkg/{i // 100:03d}.md",
        "text": f"chunk {i} v{version}: " + " ".join(f"w{(i * 7919 + k * version + k) % 5003}" for k in range(12)),
        "metadata": {"i": i, "v": version, "tags": ["a", "b"][: i % 3]},
    }


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> Path:
    with open(path, "w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGSTORE_")}
    env.update(extra)
    return env


def run_cli(
    args: Sequence[str], *, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [RAGSTORE, *args], capture_output=True, text=True, timeout=timeout, env=env or cli_env(), check=False
    )


def popen_cli(args: Sequence[str], *, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [RAGSTORE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env or cli_env()
    )


def consistent(dsn: str, table: str = "emb_docs") -> list[str]:
    """Chunk ids whose embedding row disagrees with the chunk (a half-written update); [] when whole."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            sql.SQL(
                "SELECT c.chunk_id FROM ragstore.chunks c LEFT JOIN ragstore.{t} e USING (chunk_id) "
                "WHERE e.chunk_id IS NULL OR e.content_sha256 <> c.content_sha256 "
                "OR e.package_path <> c.package_path"
            ).format(t=sql.Identifier(table))
        ).fetchall()
    return [r[0] for r in rows]


def family_data_hashes(dsn: str) -> dict[str, str]:
    """:func:`data_hashes` with each family's embedding table named ``emb@<family>`` and the registry hashed
    without ``table_name``: a model migration names its new table at random, so two runs that did the same
    work compare equal. A table no family serves (an old one left behind) keeps its own name and differs."""
    hashes = data_hashes(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        serving = conn.execute("SELECT name, table_name FROM ragstore.families").fetchall()
        rows = sorted(
            r[0]
            for r in conn.execute(
                "SELECT ROW(name, backend, model, dim, vector_type, state, options)::text FROM ragstore.families"
            )
        )
    for name, table in serving:
        hashes[f"emb@{name}"] = hashes.pop(table)
    hashes["families"] = hashlib.sha256("\n".join(rows).encode()).hexdigest()
    return hashes


class Poller:
    """Calls :meth:`poll` with a connection of its own every ``interval`` seconds, in a thread, from the
    start of the ``with`` block to its end; ``polls`` counts the calls."""

    interval = 0.01

    def __init__(self, dsn: str) -> None:
        self.polls = 0
        self._dsn = dsn
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def poll(self, conn: psycopg.Connection[Any]) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        with psycopg.connect(self._dsn, autocommit=True) as conn:
            while not self._stop.is_set():
                self.poll(conn)
                self.polls += 1
                self._stop.wait(self.interval)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def distinct_words(total_bytes: int) -> str:
    """Text of distinct words, ``total_bytes`` long: every word is its own lexeme in the tsvector."""
    words, size, i = [], 0, 0
    while size < total_bytes:
        word = f"w{i:07d}x"
        words.append(word)
        size += len(word) + 1
        i += 1
    return " ".join(words)
