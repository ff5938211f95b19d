"""Database loss and timeouts: a server that goes away mid-query, a statement past statement_timeout,
and no connection leaked after 1,000 library calls.

Proves: the library raises DatabaseUnavailable / Timeout (catchable), the CLI prints one line and exits
non-zero, the batch in flight is rolled back whole (every table's hash unchanged), and connections close.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from ragstore import families
from ragstore.db.connection import connect, db_errors
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import DatabaseUnavailable, NotFound, Timeout
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from ragstore.search import search
from tests.reliability.helpers import chunk, cli_env, run_cli, table_hashes, write_jsonl

pytestmark = pytest.mark.reliability

SLOW_TRIGGER = """
CREATE FUNCTION public.slow_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_sleep(0.2); RETURN NEW; END $$;
CREATE TRIGGER slow BEFORE INSERT ON ragstore.chunks FOR EACH ROW EXECUTE FUNCTION public.slow_insert();
"""


@pytest.fixture
def slow_db(dsn: str, tmp_path: Path) -> tuple[str, Path]:
    """Family ``docs`` with 20 chunks, and a trigger that makes every further chunk insert take 200 ms."""
    with connect(dsn) as conn:
        families.create_family(conn, "docs", OfflineBackend())
        index_sources(
            conn, "docs", open_sources([str(write_jsonl(tmp_path / "a.jsonl", (chunk(i) for i in range(20))))])
        )
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SLOW_TRIGGER)
    return dsn, write_jsonl(tmp_path / "b.jsonl", (chunk(i) for i in range(100, 140)))


def test_statement_timeout_raises_timeout_and_rolls_the_batch_back(
    slow_db: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn, src = slow_db
    before = table_hashes(dsn)
    monkeypatch.setenv("RAGSTORE_STATEMENT_TIMEOUT", "50ms")
    with connect(dsn) as conn, pytest.raises(Timeout, match="statement cancelled"):
        index_sources(conn, "docs", open_sources([str(src)]))
    with connect(dsn) as conn, pytest.raises(Timeout), db_errors():
        conn.execute("SELECT pg_sleep(1)")  # any statement: the setting is per session
    assert table_hashes(dsn) == before
    result = run_cli(["--dsn", dsn, "index", "docs", str(src)], env=cli_env(RAGSTORE_STATEMENT_TIMEOUT="50ms"))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("error: statement cancelled") and len(result.stderr.splitlines()) == 1
    assert table_hashes(dsn) == before


def test_server_going_away_mid_batch_raises_database_unavailable(slow_db: tuple[str, Path]) -> None:
    dsn, src = slow_db
    before = table_hashes(dsn)
    user = conninfo_to_dict(dsn).get("user")

    def terminate() -> None:
        time.sleep(1.0)
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() AND usename = %s",
                (user,),
            )

    killer = threading.Thread(target=terminate)
    killer.start()
    try:
        with connect(dsn) as conn, pytest.raises(DatabaseUnavailable) as caught:
            index_sources(conn, "docs", open_sources([str(src)]))
    finally:
        killer.join()
    assert not isinstance(caught.value, Timeout)
    assert table_hashes(dsn) == before


def test_refused_connection_is_one_line_and_non_zero(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "c.jsonl", [chunk(1)])
    bad = "postgresql://alice:hunter2-secret@127.0.0.1:1/ragstore?connect_timeout=2"
    for args in (["index", "docs", str(src)], ["family", "list"], ["migrate"], ["search", "docs", "q"]):
        result = run_cli(["--dsn", bad, *args])
        assert result.returncode == 1, (args, result)
        assert result.stderr.startswith("error: cannot connect to postgresql://alice:***@127.0.0.1:1/ragstore")
        assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
        assert "hunter2" not in result.stderr + result.stdout
    with pytest.raises(DatabaseUnavailable):
        connect(bad)


@pytest.mark.slow
def test_no_connection_leaks_after_1000_library_calls(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with connect(dsn) as conn:
        families.create_family(conn, "docs", OfflineBackend())
        index_sources(
            conn, "docs", open_sources([str(write_jsonl(tmp_path / "a.jsonl", (chunk(i) for i in range(50))))])
        )
    db = conninfo_to_dict(dsn)["dbname"]

    def sessions() -> int:
        with psycopg.connect(dsn, autocommit=True) as admin:
            row = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid() "
                "AND backend_type = 'client backend'",
                (db,),
            ).fetchone()
        return int(row[0]) if row else -1

    time.sleep(0.2)
    baseline = sessions()
    assert baseline == 0
    errors = 0
    hits = 0
    for i in range(1000):
        try:
            with connect(dsn) as conn:
                if i % 10 == 9:
                    search(conn, "no_such_family", "w1", k=5)  # an error path must close too
                else:
                    hits += len(search(conn, "docs", f"chunk {i % 50} w{i}", k=5))
        except NotFound:
            errors += 1
    assert errors == 100 and hits == 900 * 5
    time.sleep(0.2)  # a closed connection's backend exits a moment after the client's goodbye
    assert sessions() == baseline
