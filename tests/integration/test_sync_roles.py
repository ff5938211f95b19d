"""``ragstore sync`` and the roles: installing or changing triggers needs the table's owner (one line naming
it, on the command line too), the worker runs as ``ragstore_app`` (a bulk backfill included), and
``ragstore_reader`` can change nothing of the queue, the synced rows or the sources, nor call the trigger
function itself."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from ragstore import families
from ragstore.cli.main import cli
from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import PermissionDenied
from ragstore.ingest.writer import BULK_THRESHOLD
from ragstore.sync.sources import add_source, alter_source, remove_source
from ragstore.sync.worker import run_workers
from tests.toolkit.definer_audit import app_dsn, owner_dsn, reader_dsn
from tests.toolkit.sync import chunk_ids, make_table, queued

__all__ = ["app_dsn", "owner_dsn", "reader_dsn"]  # fixtures


@pytest.fixture
def synced(conn: Any) -> Any:
    families.create_family(conn, "docs", OfflineBackend())
    make_table(conn)
    add_source(conn, "docs", "public.docs", id_column="id", text_columns=["body"])
    return conn


def test_a_role_that_does_not_own_the_table_cannot_alter_and_is_told_in_one_line(synced, owner_dsn, dsn):
    owner = synced.execute("SELECT current_user").fetchone()[0]
    synced.commit()
    with connect(owner_dsn) as other, pytest.raises(PermissionDenied) as caught:
        alter_source(other, "docs", "public.docs", text_columns=["title", "body"])
    assert str(caught.value) == (
        f"sync alter: installing triggers on public.docs needs its owner: connect as {owner} "
        "(or a member of it); the current role is not"
    )
    url = owner_dsn
    added = CliRunner().invoke(
        cli, ["--dsn", url, "sync", "add", "docs", "--table", "public.docs", "--id", "id", "--text", "title"]
    )
    lines = added.output.strip().splitlines()
    assert added.exit_code != 0 and len(lines) == 1 and f"needs its owner: connect as {owner}" in lines[0]
    row = synced.execute("SELECT text_columns FROM ragstore.sync_sources").fetchone()
    synced.commit()
    assert row == (["body"],)  # nothing changed


def test_the_reader_can_change_nothing_of_sync(synced, reader_dsn):
    statements = [
        "INSERT INTO ragstore.sync_queue (source_id, key, seq) VALUES (1, '9', 1)",
        "UPDATE ragstore.sync_queue SET not_before = 'infinity'",
        "DELETE FROM ragstore.sync_queue",
        "INSERT INTO ragstore.sync_rows (source_id, key, chunks) VALUES (1, '9', 1)",
        "DELETE FROM ragstore.sync_rows",
        "UPDATE ragstore.sync_sources SET predicate = 'false'",
        "UPDATE ragstore.sync_sources SET last_error = 'x'",
        "DELETE FROM ragstore.sync_sources",
        "SELECT ragstore.sync_enqueue()",
    ]
    with connect(reader_dsn) as reader:
        for statement in statements:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                reader.execute(statement)
            reader.rollback()
        with pytest.raises(PermissionDenied):
            remove_source(reader, "docs", "public.docs")
        reader.rollback()
        assert reader.execute("SELECT queued FROM ragstore.sync_status").fetchone() == (3,)  # it may read
    assert queued(synced) == ["1", "2", "3"]


@pytest.mark.slow
def test_the_app_role_runs_a_bulk_backfill_with_two_workers(conn, app_dsn):
    families.create_family(conn, "docs", OfflineBackend())
    make_table(conn, rows={i: f"row {i} on topic {i % 11}" for i in range(1, BULK_THRESHOLD + 1)})
    conn.execute("GRANT SELECT ON public.docs TO ragstore_app")
    conn.commit()
    add_source(conn, "docs", "public.docs", id_column="id", text_columns=["body"])
    report = run_workers(app_dsn, batch=500, workers=2)
    assert (report.written, report.embedded, report.failures) == (BULK_THRESHOLD, BULK_THRESHOLD, [])
    assert len(chunk_ids(conn)) == BULK_THRESHOLD and queued(conn) == []
    conn.execute("UPDATE public.docs SET body = 'changed' WHERE id = 7")
    conn.commit()
    assert run_workers(app_dsn).embedded == 1
