"""``ragstore sync`` on real tables: the triggers queue exactly the rows whose followed columns changed
(inserts, updates of followed columns, deletes, truncates; an update of another column queues nothing),
``sync run --once`` writes them through the writer of ``ragstore index`` and deletes the chunks of rows
gone, every name reaches SQL as an identifier, and the roles hold (the table's owner installs, the reader
writes nothing). Two workers never embed a row twice; one family's failing provider backs off alone."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from ragstore import families
from ragstore.cli.main import cli
from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend
from ragstore.embed.openai import OpenAIBackend
from ragstore.errors import BackendError, Conflict, InvalidInput, PermissionDenied
from ragstore.families.chunks import get_chunks
from ragstore.search.api import search
from ragstore.sync import worker as sync_worker
from ragstore.sync.sources import add_source, list_sources, remove_source
from ragstore.sync.sources import status as sync_status
from ragstore.sync.worker import follow, run_once
from tests.openai_stub import Reply, StubServer
from tests.toolkit.definer_audit import app_dsn, owner_dsn, reader_dsn
from tests.toolkit.sync import Counting, chunk_ids, make_table, queued, wait_for

__all__ = ["app_dsn", "owner_dsn", "reader_dsn"]  # fixtures


@pytest.fixture
def synced(conn: Any) -> Any:
    families.create_family(conn, "docs", OfflineBackend())
    make_table(conn)
    source, count = add_source(
        conn, "docs", "public.docs", id_column="id", text_columns=["title", "body"], metadata_columns=["views"]
    )
    assert count == 3 and source.followed == ["id", "title", "body", "views"]
    return conn


def test_add_backfills_and_run_once_makes_rows_searchable(synced):
    assert queued(synced) == ["1", "2", "3"]
    report = run_once(synced)
    assert (report.written, report.deleted, report.embedded, report.failures) == (3, 0, 3, [])
    assert queued(synced) == []
    got = get_chunks(synced, "docs", ["docs/2"]).chunks[0]
    assert got.text == "title 2\n\ngzip compresses one stream" and got.metadata == {"views": 0}
    hits = search(synced, "docs", "gzip compresses one stream", k=1)
    assert hits[0].chunk_id == "docs/2"
    assert run_once(synced).written == 0  # nothing queued: nothing read, nothing embedded


def test_update_of_a_column_not_followed_queues_nothing(conn):
    families.create_family(conn, "docs", OfflineBackend())
    make_table(conn)
    add_source(conn, "docs", "public.docs", id_column="id", text_columns=["body"])
    run_once(conn)
    conn.execute("UPDATE public.docs SET views = views + 1")
    conn.execute("UPDATE public.docs SET body = body WHERE id = 1")  # a followed column, unchanged
    conn.commit()
    assert queued(conn) == []
    conn.execute("UPDATE public.docs SET body = 'bzip2 compresses blocks' WHERE id = 3")
    conn.commit()
    assert queued(conn) == ["3"]
    report = run_once(conn)
    assert (report.written, report.embedded) == (1, 1)
    assert get_chunks(conn, "docs", ["docs/3"]).chunks[0].text == "bzip2 compresses blocks"


def test_delete_and_truncate_remove_exactly_their_chunks(synced):
    other = OfflineBackend()
    families.create_family(synced, "other", other)
    run_once(synced)
    synced.execute("DELETE FROM public.docs WHERE id = 2")
    synced.commit()
    assert queued(synced) == ["2"]
    report = run_once(synced)
    assert (report.written, report.deleted) == (0, 1)
    assert chunk_ids(synced) == ["docs/1", "docs/3"]
    synced.execute("TRUNCATE public.docs")
    synced.commit()
    assert queued(synced) == ["1", "3"]
    assert run_once(synced).deleted == 2
    assert chunk_ids(synced) == []
    synced.execute("INSERT INTO public.docs (id, body) VALUES (7, 'back again')")
    synced.commit()
    run_once(synced)
    assert chunk_ids(synced) == ["docs/7"]


def test_blank_text_and_the_where_predicate_decide_which_rows_have_chunks(conn):
    families.create_family(conn, "docs", OfflineBackend())
    make_table(conn)
    conn.execute("ALTER TABLE public.docs ADD COLUMN published boolean DEFAULT true")
    conn.commit()
    source, _ = add_source(conn, "docs", "public.docs", id_column="id", text_columns=["body"], predicate="published")
    assert "published" in source.followed  # the predicate's column is followed too
    run_once(conn)
    assert chunk_ids(conn) == ["docs/1", "docs/2", "docs/3"]
    conn.execute("UPDATE public.docs SET published = false WHERE id = 1")
    conn.execute("UPDATE public.docs SET body = '  ' WHERE id = 2")
    conn.commit()
    assert run_once(conn).deleted == 2
    assert chunk_ids(conn) == ["docs/3"]


def test_a_predicate_that_is_not_one_expression_is_refused(conn):
    families.create_family(conn, "docs", OfflineBackend())
    make_table(conn)
    with pytest.raises(InvalidInput, match="without ';'"):
        add_source(
            conn, "docs", "public.docs", id_column="id", text_columns=["body"], predicate="true); DROP TABLE x; ("
        )
    with pytest.raises(InvalidInput, match="--where 'nosuch > 1'"):
        add_source(conn, "docs", "public.docs", id_column="id", text_columns=["body"], predicate="nosuch > 1")
    assert list_sources(conn) == []


def test_hostile_names_are_identifiers(conn):
    families.create_family(conn, "docs", OfflineBackend())
    table, key, text = 'my "docs"; drop', "Key Col", 'body"); DROP TABLE public.keep; --'
    conn.execute("CREATE TABLE public.keep (x int)")
    conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier("Odd Schema")))
    conn.execute(
        sql.SQL("CREATE TABLE {} ({} text PRIMARY KEY, {} text, other int)").format(
            sql.Identifier("Odd Schema", table), sql.Identifier(key), sql.Identifier(text)
        )
    )
    conn.execute(sql.SQL("INSERT INTO {} VALUES ('a b', 'hello there', 0)").format(sql.Identifier("Odd Schema", table)))
    conn.commit()
    add_source(conn, "docs", f"Odd Schema.{table}", id_column=key, text_columns=[text])
    run_once(conn)
    conn.execute(sql.SQL("UPDATE {} SET other = 1").format(sql.Identifier("Odd Schema", table)))
    conn.commit()
    assert queued(conn) == []
    conn.execute(
        sql.SQL("UPDATE {} SET {} = 'changed'").format(sql.Identifier("Odd Schema", table), sql.Identifier(text))
    )
    conn.commit()
    run_once(conn)
    assert get_chunks(conn, "docs", ['my "docs"; drop/a b']).chunks[0].text == "changed"
    assert conn.execute("SELECT to_regclass('public.keep')").fetchone()[0] is not None


def test_a_role_that_does_not_own_the_table_is_told_who_does(conn, owner_dsn):
    families.create_family(conn, "docs", OfflineBackend())
    make_table(conn)
    owner = conn.execute("SELECT current_user").fetchone()[0]
    conn.commit()
    with connect(owner_dsn) as other, pytest.raises(PermissionDenied) as caught:
        add_source(other, "docs", "public.docs", id_column="id", text_columns=["body"])
    message = str(caught.value)
    assert "\n" not in message and f"needs its owner: connect as {owner}" in message
    assert list_sources(conn) == []


def test_the_reader_cannot_run_a_worker_nor_write_the_queue(synced, reader_dsn, app_dsn):
    with connect(reader_dsn) as reader:
        assert [s.name for s in list_sources(reader)] == ["public.docs"]
        with pytest.raises(PermissionDenied):
            run_once(reader)
        reader.rollback()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            reader.execute("DELETE FROM ragstore.sync_queue")
    assert queued(synced) == ["1", "2", "3"]
    synced.execute("GRANT SELECT, INSERT ON public.docs TO ragstore_app")
    synced.commit()
    with connect(app_dsn) as app:  # the worker's role; writing the table needs no right on the queue
        app.execute("INSERT INTO public.docs (id, body) VALUES (4, 'written by the app')")
        app.commit()
        assert run_once(app).written == 4
    assert chunk_ids(synced) == ["docs/1", "docs/2", "docs/3", "docs/4"]


def test_remove_keeps_chunks_unless_asked_and_family_drop_removes_the_triggers(synced):
    run_once(synced)
    remove_source(synced, "docs", "public.docs")
    assert chunk_ids(synced) == ["docs/1", "docs/2", "docs/3"]
    assert triggers(synced) == 0
    add_source(synced, "docs", "public.docs", id_column="id", text_columns=["body"])
    run_once(synced)
    with pytest.raises(Conflict, match="already follows"):
        add_source(synced, "docs", "public.docs", id_column="id", text_columns=["body"])
    _, deleted = remove_source(synced, "docs", "public.docs", delete_chunks=True)
    assert deleted == 3 and chunk_ids(synced) == []
    add_source(synced, "docs", "public.docs", id_column="id", text_columns=["body"])
    assert triggers(synced) == 4
    families.drop_family(synced, "docs")
    assert triggers(synced) == 0
    synced.execute("INSERT INTO public.docs (id, body) VALUES (9, 'still writable')")
    synced.commit()
    assert queued(synced) == []


def triggers(conn: Any) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'public.docs'::regclass AND NOT tgisinternal"
    ).fetchone()
    conn.commit()
    return int(row[0])


class Failing(Counting):
    def embed(self, texts: Sequence[str]) -> Any:
        raise BackendError("provider answered 429 Too Many Requests")


def test_two_workers_at_once_embed_each_row_once(conn, dsn):
    rows = {i: f"row {i} text about archive number {i}" for i in range(1, 301)}
    families.create_family(conn, "docs", OfflineBackend())
    make_table(conn, rows=rows)
    add_source(conn, "docs", "public.docs", id_column="id", text_columns=["body"])
    counting = Counting()
    errors: list[BaseException] = []

    def work() -> None:
        try:
            with connect(dsn) as mine:
                run_once(mine, batch=20, backend=lambda _: counting)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(counting.texts) == sorted(rows.values())  # every row once, none twice
    assert len(chunk_ids(conn)) == 300 and queued(conn) == []


def test_a_failing_provider_backs_off_its_own_family_only(conn, monkeypatch):
    # A first backoff of an hour, not a second: a loaded machine may take longer than a second between the
    # failure and the second run below, which would then claim the keys again.
    monkeypatch.setattr(sync_worker, "BACKOFF_SECONDS", 3600.0)
    families.create_family(conn, "docs", OfflineBackend())
    families.create_family(conn, "tickets", OfflineBackend())
    make_table(conn)
    make_table(conn, "tickets", {5: "printer is on fire", 6: "vpn drops hourly"})
    add_source(conn, "docs", "public.docs", id_column="id", text_columns=["body"])
    add_source(conn, "tickets", "public.tickets", id_column="id", text_columns=["body"])
    good = Counting()
    report = run_once(conn, backend=lambda s: Failing() if s.family == "docs" else good)
    assert report.written == 2 and len(report.failures) == 1 and "429" in report.failures[0]
    assert chunk_ids(conn, "tickets") == ["tickets/5", "tickets/6"] and chunk_ids(conn, "docs") == []
    state = conn.execute(
        "SELECT key, attempts, not_before > now(), last_error FROM ragstore.sync_queue ORDER BY key"
    ).fetchall()
    conn.commit()
    assert [(k, a, later) for k, a, later, _ in state] == [("1", 1, True), ("2", 1, True), ("3", 1, True)]
    assert all("429" in e for *_, e in state)
    assert run_once(conn).written == 0  # backing off: not claimed again before not_before
    conn.execute("UPDATE ragstore.sync_queue SET not_before = now()")  # the backoff over
    conn.commit()
    assert run_once(conn).written == 3
    assert chunk_ids(conn, "docs") == ["docs/1", "docs/2", "docs/3"]


def test_cli_add_run_status_list_remove(dsn, conn):
    families.create_family(conn, "docs", OfflineBackend())
    make_table(conn)

    def ragstore(*args: str) -> Any:
        return CliRunner().invoke(cli, ["--dsn", dsn, "sync", *args])

    added = ragstore("add", "docs", "--table", "public.docs", "--id", "id", "--text", "body", "--metadata", "title")
    assert added.exit_code == 0 and "3 rows queued" in added.output
    status = json.loads(ragstore("status", "--json").output)
    assert [(s["family"], s["queued"]) for s in status] == [("docs", 3)]
    ran = ragstore("run", "--once", "--json")
    assert json.loads(ran.output)["written"] == 3
    status = json.loads(ragstore("status", "--json").output)
    assert (status[0]["queued"], status[0]["synced_keys"], status[0]["lag_seconds"]) == (0, 3, 0)
    assert "public.docs\tid=id\ttext=body\tmetadata=title" in ragstore("list").output
    shown = json.loads(ragstore("show", "docs", "--table", "public.docs").output)
    assert (shown["followed"], shown["status"]["synced_keys"]) == (["id", "body", "title"], 3)
    missing = ragstore("show", "docs", "--table", "public.other")
    assert missing.exit_code != 0 and "does not follow public.other" in missing.output
    bad = ragstore("add", "docs", "--table", "public.nope", "--id", "id", "--text", "body")
    assert bad.exit_code != 0 and bad.output.strip().splitlines()[-1].endswith("no table public.nope")
    assert "Traceback" not in bad.output
    removed = ragstore("remove", "docs", "--table", "public.docs")
    assert removed.exit_code == 0 and "its chunks kept" in removed.output
    assert ragstore("list").output == ""


def test_a_provider_answering_429_over_http_delays_its_family_only(conn, monkeypatch):
    # A first backoff of an hour, not a second: a loaded machine may take longer than a second between the
    # failure and the status read below, and then the keys would no longer be backing off.
    monkeypatch.setattr(sync_worker, "BACKOFF_SECONDS", 3600.0)
    with StubServer(native_dim=8) as stub:
        backend = OpenAIBackend(base_url=stub.url, model="m", dim=8, api_key_env="NO_SUCH_KEY_VAR", max_retries=0)
        families.create_family(conn, "docs", backend, options={"base_url": stub.url, "max_retries": 0})
        families.create_family(conn, "tickets", OfflineBackend())
        make_table(conn)
        make_table(conn, "tickets", {5: "printer is on fire"})
        add_source(conn, "docs", "public.docs", id_column="id", text_columns=["body"])
        add_source(conn, "tickets", "public.tickets", id_column="id", text_columns=["body"])
        stub.queue(Reply(status=429, headers={"Retry-After": "0"}))
        report = run_once(conn)
        assert report.written == 1 and len(report.failures) == 1
        assert chunk_ids(conn, "tickets") == ["tickets/5"] and chunk_ids(conn, "docs") == []
        status = {s["family"]: s for s in sync_status(conn)}
        assert status["docs"]["backing_off"] == 3 and status["docs"]["last_error"].startswith("public.docs: ")
        assert (status["tickets"]["queued"], status["tickets"]["last_error"]) == (0, None)
        conn.execute("UPDATE ragstore.sync_queue SET not_before = now()")  # the backoff over
        conn.commit()
        assert run_once(conn).written == 3  # the stub answers normally again
        assert sync_status(conn)[0]["last_error"] is None


def test_follow_wakes_on_notify_and_syncs_each_commit(conn, dsn):
    families.create_family(conn, "docs", OfflineBackend())
    make_table(conn)
    add_source(conn, "docs", "public.docs", id_column="id", text_columns=["body"])
    stop = threading.Event()
    reports: list[Any] = []

    def worker() -> None:
        with connect(dsn) as mine, connect(dsn, autocommit=True) as listener:
            follow(mine, listener, ["docs"], idle_seconds=60, stop=stop.is_set, on_report=reports.append)

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        assert wait_for(lambda: chunk_ids(conn) == ["docs/1", "docs/2", "docs/3"])
        conn.execute("INSERT INTO public.docs (id, body) VALUES (4, 'zstd is fast')")
        conn.commit()  # idle_seconds is 60: only the NOTIFY wakes the worker this soon
        assert wait_for(lambda: "docs/4" in chunk_ids(conn))
    finally:
        stop.set()
        conn.execute("NOTIFY ragstore_sync_docs")
        conn.commit()
        thread.join()
    assert sum(r.written for r in reports) == 4
