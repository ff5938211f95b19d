"""``ragstore vacuum [FAMILY] [--full]``: the space a family drop or a large delete left in the tables goes
back to the disk (compared by ``pg_total_relation_size``/``pg_database_size``, never by time); other
families keep every chunk; the app and reader roles are refused in one line, before anything runs."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from click.testing import CliRunner
from psycopg import sql

from ragstore import families
from ragstore.cli.main import cli
from ragstore.embed.offline import OfflineBackend
from ragstore.families.chunks import delete_chunks
from ragstore.families.vacuum import SHARED_TABLES, vacuum
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.run import write_records
from tests.toolkit.definer_audit import app_dsn, reader_dsn

__all__ = ["app_dsn", "reader_dsn"]  # fixtures

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar".split()


def no_other_snapshot(conn: Any, seconds: float = 120.0) -> None:
    """Turn autovacuum off for ragstore's tables, then wait until no other session of this database holds a
    snapshot (an autovacuum worker's ANALYZE of a shared table, say): VACUUM FULL keeps every deleted row
    such a snapshot may still see."""
    tables = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'ragstore'").fetchall()
    for (name,) in tables:
        conn.execute(sql.SQL("ALTER TABLE ragstore.{} SET (autovacuum_enabled = false)").format(sql.Identifier(name)))
    conn.commit()
    deadline = time.monotonic() + seconds
    while True:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND backend_xmin IS NOT NULL"
        ).fetchone()
        conn.commit()
        if row[0] == 0:
            return
        assert time.monotonic() < deadline, f"{row[0]} other sessions still hold a snapshot"
        time.sleep(0.2)


def load(conn: Any, name: str, rows: int) -> None:
    fam = families.create_family(conn, name, OfflineBackend())
    records = [
        (
            f"r{i}",
            ChunkRecord(
                chunk_id=f"{name}-{i}",
                package_path=f"pkg{i % 20}/doc",
                text=" ".join(f"{WORDS[(i * 7 + j) % len(WORDS)]}{(i + j) % 97}" for j in range(120)),
            ),
        )
        for i in range(rows)
    ]
    write_records(conn, fam, OfflineBackend(), records)
    conn.commit()


def shared_bytes(conn: Any) -> int:
    row = conn.execute(
        "SELECT sum(pg_total_relation_size(format('ragstore.%%I', t)::regclass)) FROM unnest(%s::text[]) AS t",
        (list(SHARED_TABLES),),
    ).fetchone()
    return int(row[0])


def count(conn: Any, family: str) -> int:
    return int(conn.execute("SELECT count(*) FROM ragstore.chunks WHERE family = %s", (family,)).fetchone()[0])


@pytest.mark.slow
def test_vacuum_after_a_drop_returns_the_shared_tables_space(conn):
    load(conn, "big", 3000)
    before = shared_bytes(conn)
    families.drop_family(conn, "big")
    conn.commit()
    assert shared_bytes(conn) >= before * 0.9  # a drop alone returns the shared tables' space to nobody
    report = vacuum(conn)  # the heaps' empty pages go back; the indexes keep theirs for reuse
    assert shared_bytes(conn) < before * 0.75
    assert report.reclaimed > 0 and report.database[1] < report.database[0]
    assert set(SHARED_TABLES) <= set(report.tables) and not report.full
    vacuum(conn, full=True)
    assert shared_bytes(conn) < before / 10


@pytest.mark.slow
def test_vacuum_full_after_a_drop_keeps_the_other_family_whole(conn):
    load(conn, "gone", 2000)
    load(conn, "kept", 500)  # written after: its rows hold the end of each shared table
    families.drop_family(conn, "gone")
    conn.commit()
    before = shared_bytes(conn)
    report = vacuum(conn, "kept", full=True)
    assert report.full and report.family == "kept"
    assert shared_bytes(conn) < before / 2
    assert report.tables["chunks"][1] < report.tables["chunks"][0]
    assert count(conn, "kept") == 500
    hits = conn.execute("SELECT count(*) FROM ragstore.search_text('kept', 'alpha1 bravo2', 10)").fetchone()
    assert hits == (10,)


@pytest.mark.slow
def test_vacuum_of_a_family_after_a_large_delete_shrinks_its_table(conn):
    load(conn, "docs", 2000)
    table = families.get_family(conn, "docs").table
    delete_chunks(conn, "docs", prefixes=[f"pkg{i}/" for i in range(20) if i != 3])
    conn.commit()
    no_other_snapshot(conn)
    report = vacuum(conn, "docs", full=True)
    before, after = report.tables[table]
    assert after < before / 2
    assert count(conn, "docs") == 100


@pytest.mark.slow
def test_the_cli_says_what_it_returned(dsn, conn):
    load(conn, "big", 1000)
    conn.commit()
    dropped = CliRunner().invoke(cli, ["--dsn", dsn, "family", "drop", "big", "--yes"], catch_exceptions=False)
    assert dropped.output.splitlines()[0] == "dropped family big"
    assert "`ragstore vacuum --full` returns it to the disk" in dropped.output
    result = CliRunner().invoke(cli, ["--dsn", dsn, "vacuum"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert first.startswith("vacuum: ") and "returned to the disk (database " in first
    assert "ragstore.chunks: " in result.output and "--full" in result.output
    result = CliRunner().invoke(cli, ["--dsn", dsn, "vacuum", "--full", "--json"], catch_exceptions=False)
    data = json.loads(result.output)
    assert data["full"] is True and set(SHARED_TABLES) <= set(data["tables"])
    result = CliRunner().invoke(cli, ["--dsn", dsn, "vacuum", "nope"], catch_exceptions=False)
    assert result.exit_code == 1 and result.output.startswith("error: no family named 'nope'")


@pytest.mark.parametrize("role", ["app", "reader"])
def test_the_app_and_reader_roles_are_refused_in_one_line(role, conn, app_dsn, reader_dsn):
    load(conn, "docs", 50)
    role_dsn = app_dsn if role == "app" else reader_dsn
    for args in (["vacuum"], ["vacuum", "docs", "--full"]):
        result = CliRunner().invoke(cli, ["--dsn", role_dsn, *args], catch_exceptions=False)
        assert result.exit_code == 1
        lines = result.output.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: permission denied: role 'rs_")
        assert "may not vacuum the ragstore tables" in lines[0] and "ragstore_owner" in lines[0]


async def test_store_and_async_store_vacuum_are_the_same_call(dsn, conn):
    from ragstore.store import Store
    from ragstore.store_async import AsyncStore

    load(conn, "docs", 300)
    delete_chunks(conn, "docs", prefixes=["pkg"])
    conn.commit()
    table = families.get_family(conn, "docs").table
    with Store(dsn) as store:
        report = store.vacuum("docs", full=True)
    assert report.tables[table][1] < report.tables[table][0] and report.family == "docs"
    async with AsyncStore(dsn) as astore:
        again = await astore.vacuum()
    assert not again.full and table in again.tables and again.tables[table][0] == report.tables[table][1]
