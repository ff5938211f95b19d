"""``Store.sync_*`` and ``AsyncStore.sync_*`` (the same tests against both), and ``sync alter``: what is
followed changes in place and only what the change requires is queued and embedded; a ``--package``
expression; rows whose text makes several chunks, which shrink, grow and go without leaving one behind."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from click.testing import CliRunner
from psycopg import sql

from ragstore import families
from ragstore.cli.main import cli
from ragstore.embed.offline import OfflineBackend
from ragstore.embed.openai import OpenAIBackend
from ragstore.errors import InvalidInput, NotFound
from ragstore.families.chunks import get_chunks
from ragstore.sync.sources import add_source, alter_source
from ragstore.sync.sources import status as sync_status
from ragstore.sync.worker import follow_workers, run_once, run_workers
from tests.openai_stub import Reply, StubServer
from tests.toolkit.store import store  # the Store / AsyncStore fixture
from tests.toolkit.sync import Counting, chunk_ids, make_table, queued, wait_for

__all__ = ["store"]


def test_the_store_adds_runs_shows_lists_alters_and_removes(store: Any, conn: Any) -> None:
    store.create_family("docs", "offline")
    make_table(conn)
    source, count = store.sync_add("docs", "public.docs", id_column="id", text_columns=["body"])
    assert (source.name, count) == ("public.docs", 3)
    assert [s.name for s in store.sync_list()] == ["public.docs"] and store.sync_list(["other"]) == []
    report = store.sync_run()
    assert (report.written, report.embedded, report.failures) == (3, 3, [])
    assert chunk_ids(conn) == ["docs/1", "docs/2", "docs/3"]
    shown = store.sync_show("docs", "public.docs")
    assert (shown["followed"], shown["status"]["synced_keys"], shown["status"]["queued"]) == (["id", "body"], 3, 0)
    altered, requeued = store.sync_alter("docs", "public.docs", metadata_columns=["title"])
    assert altered.metadata_columns == ["title"] and requeued == 3
    again = store.sync_run(workers=2)
    assert (again.written, again.embedded) == (3, 0)  # metadata only: nothing embedded
    assert get_chunks(conn, "docs", ["docs/1"]).chunks[0].metadata == {"title": "title 1"}
    assert [s["family"] for s in store.sync_status()] == ["docs"]
    with pytest.raises(NotFound, match=r"does not follow public\.nope"):
        store.sync_show("docs", "public.nope")
    removed, deleted = store.sync_remove("docs", "public.docs", delete_chunks=True)
    assert (removed.name, deleted) == ("public.docs", 3) and chunk_ids(conn) == []
    assert store.sync_list() == []


@pytest.fixture
def followed(conn: Any) -> Any:
    families.create_family(conn, "docs", OfflineBackend())
    make_table(conn)
    conn.execute("ALTER TABLE public.docs ADD COLUMN lang text DEFAULT 'en', ADD COLUMN published boolean DEFAULT true")
    conn.execute("UPDATE public.docs SET published = false WHERE id = 3")
    conn.commit()
    add_source(conn, "docs", "public.docs", id_column="id", text_columns=["body"], predicate="published")
    run_once(conn)
    assert chunk_ids(conn) == ["docs/1", "docs/2"]
    return conn


def run_counting(conn: Any) -> tuple[Any, list[str]]:
    counting = Counting()
    report = run_once(conn, backend=lambda _: counting)
    return report, counting.texts


def test_alter_of_the_text_columns_reembeds_only_rows_whose_text_changed(followed: Any) -> None:
    followed.execute("UPDATE public.docs SET title = NULL WHERE id = 2")  # its text stays the body alone
    followed.commit()
    source, count = alter_source(followed, "docs", "public.docs", text_columns=["title", "body"])
    assert source.followed == ["id", "title", "body", "published"] and count == 3
    report, texts = run_counting(followed)
    assert texts == ["title 1\n\ntar stores archives of directories"]  # row 2's text is unchanged
    assert (report.written, report.deleted) == (2, 0) and chunk_ids(followed) == ["docs/1", "docs/2"]
    followed.execute("UPDATE public.docs SET title = 'a new title' WHERE id = 2")  # title is followed now
    followed.commit()
    assert queued(followed) == ["2"]


def test_alter_of_the_predicate_queues_only_the_rows_it_moves(followed: Any) -> None:
    _, count = alter_source(followed, "docs", "public.docs", predicate="id <> 1")
    assert count == 2 and queued(followed) == ["1", "3"]  # 1 leaves, 3 enters; 2 stays in: not queued
    report, texts = run_counting(followed)
    assert texts == ["rsync copies files over ssh"] and report.deleted == 1
    assert chunk_ids(followed) == ["docs/2", "docs/3"]
    followed.execute("UPDATE public.docs SET published = false")  # no longer read by the predicate
    followed.commit()
    assert queued(followed) == []
    _, count = alter_source(followed, "docs", "public.docs", predicate=None)
    assert count == 1 and run_once(followed).written == 1
    assert chunk_ids(followed) == ["docs/1", "docs/2", "docs/3"]


def test_alter_of_metadata_and_package_embeds_nothing(followed: Any) -> None:
    _, count = alter_source(
        followed, "docs", "public.docs", metadata_columns=["lang"], package="lang || '/' || id::text"
    )
    assert count == 2  # the rows with chunks
    report, texts = run_counting(followed)
    assert (report.written, texts) == (2, [])
    got = get_chunks(followed, "docs", ["docs/1", "docs/2"]).chunks
    assert [(c.package_path, c.metadata) for c in got] == [("en/1", {"lang": "en"}), ("en/2", {"lang": "en"})]
    followed.execute("UPDATE public.docs SET lang = 'fr' WHERE id = 2")  # the package expression reads lang
    followed.commit()
    assert queued(followed) == ["2"]
    run_once(followed)
    assert get_chunks(followed, "docs", ["docs/2"]).chunks[0].package_path == "fr/2"
    _, count = alter_source(followed, "docs", "public.docs", metadata_columns=[], package=None)
    assert count == 2 and run_counting(followed)[1] == []
    assert get_chunks(followed, "docs", ["docs/2"]).chunks[0].package_path == "docs/2"


def test_alter_refuses_bad_settings_and_changes_nothing(followed: Any) -> None:
    with pytest.raises(NotFound, match="--text 'nosuch'"):
        alter_source(followed, "docs", "public.docs", text_columns=["nosuch"])
    with pytest.raises(InvalidInput, match=r'--package "nosuch.*column "nosuch" does not exist'):
        alter_source(followed, "docs", "public.docs", package="nosuch || 'x'")
    with pytest.raises(InvalidInput, match="without ';'"):
        alter_source(followed, "docs", "public.docs", predicate="true; DROP TABLE public.docs")
    with pytest.raises(NotFound, match=r"does not follow public\.other"):
        alter_source(followed, "docs", "public.other", predicate="true")
    assert queued(followed) == []
    row = followed.execute("SELECT text_columns, predicate FROM ragstore.sync_sources").fetchone()
    followed.commit()
    assert row == (["body"], "published")


def long_text(words: int, seed: str) -> str:
    return "\n\n".join(f"{seed} paragraph {n} " + " ".join(f"word{n}x{k}" for k in range(40)) for n in range(words))


def test_a_row_whose_text_makes_several_chunks_keeps_exactly_its_chunks(conn: Any) -> None:
    families.create_family(conn, "docs", OfflineBackend())
    make_table(conn, rows={1: long_text(12, "one"), 2: "short"})
    add_source(conn, "docs", "public.docs", id_column="id", text_columns=["body"])
    run_once(conn)
    ids = chunk_ids(conn)
    many = [i for i in ids if i.startswith("docs/1#")]
    assert len(many) > 2 and "docs/1" not in ids and "docs/2" in ids
    texts = [c.text for c in get_chunks(conn, "docs", many).chunks]
    assert all(len(t) <= 1200 for t in texts) and "one paragraph 11" in texts[-1]
    set_body(conn, 1, long_text(4, "one"))  # shrinks: the chunks beyond are deleted
    run_once(conn)
    fewer = [i for i in chunk_ids(conn) if i.startswith("docs/1")]
    assert 1 < len(fewer) < len(many)
    set_body(conn, 1, "now short")  # one chunk: the row's plain id again
    run_once(conn)
    assert chunk_ids(conn) == ["docs/1", "docs/2"]
    set_body(conn, 1, long_text(6, "again"))
    run_once(conn)
    conn.execute("DELETE FROM public.docs WHERE id = 1")
    conn.commit()
    assert run_once(conn).deleted == 1 and chunk_ids(conn) == ["docs/2"]


def set_body(conn: Any, key: int, body: str, table: Sequence[str] = ("public", "docs")) -> None:
    conn.execute(sql.SQL("UPDATE {} SET body = %s WHERE id = %s").format(sql.Identifier(*table)), (body, key))
    conn.commit()


def test_two_workers_embed_each_changed_row_once_through_a_stub_provider(conn: Any, dsn: str) -> None:
    rows = {i: f"row {i} about archive number {i}" for i in range(1, 1001)}
    with StubServer(native_dim=8) as stub:
        backend = OpenAIBackend(base_url=stub.url, model="m", dim=8, api_key_env="NO_SUCH_KEY_VAR", max_retries=0)
        families.create_family(conn, "docs", backend, options={"base_url": stub.url, "max_retries": 0})
        make_table(conn, rows=rows)
        add_source(conn, "docs", "public.docs", id_column="id", text_columns=["body"])
        first = run_workers(dsn, batch=100, workers=2)
        sent = [t for r in stub.requests for t in r.body["input"]]
        assert (first.written, first.embedded, sorted(sent)) == (1000, 1000, sorted(rows.values()))
        stub.requests.clear()
        conn.execute("UPDATE public.docs SET views = views + 1")  # 1,000 updates of a column not followed
        conn.commit()
        assert queued(conn) == [] and run_workers(dsn, workers=2).written == 0 and stub.requests == []
        conn.execute("UPDATE public.docs SET body = body || ' (edited)' WHERE id <= 10")
        conn.commit()
        again = run_workers(dsn, batch=3, workers=2)
        sent = [t for r in stub.requests for t in r.body["input"]]
        assert sorted(sent) == sorted(f"{rows[i]} (edited)" for i in range(1, 11))  # each once, no other
        assert (again.written, again.embedded) == (10, 10)
        before = chunk_ids(conn)
        conn.execute("DELETE FROM public.docs WHERE id IN (3, 30, 300, 301, 999)")
        conn.commit()
        assert run_workers(dsn, workers=2).deleted == 5
        gone = {f"docs/{i}" for i in (3, 30, 300, 301, 999)}
        assert chunk_ids(conn) == [c for c in before if c not in gone]  # exactly their chunks
        conn.execute("TRUNCATE public.docs")
        conn.commit()
        assert run_workers(dsn, workers=2).deleted == 995
    assert chunk_ids(conn) == [] and queued(conn) == []


def test_cli_alter_and_run_with_workers(conn: Any, dsn: str) -> None:
    families.create_family(conn, "docs", OfflineBackend())
    make_table(conn)

    def ragstore(*args: str) -> Any:
        return CliRunner().invoke(cli, ["--dsn", dsn, "sync", *args])

    assert ragstore("add", "docs", "--table", "public.docs", "--id", "id", "--text", "body").exit_code == 0
    ran = ragstore("run", "--workers", "2", "--batch-size", "1", "--json")
    assert json.loads(ran.output)["written"] == 3
    altered = ragstore("alter", "docs", "--table", "public.docs", "--metadata", "title", "--package", "'p' || id")
    assert altered.exit_code == 0 and "3 rows queued again" in altered.output
    assert json.loads(ragstore("run", "--json").output)["embedded"] == 0
    assert get_chunks(conn, "docs", ["docs/3"]).chunks[0].package_path == "p3"
    both = ragstore("alter", "docs", "--table", "public.docs", "--where", "id > 1", "--no-where")
    assert both.exit_code != 0 and "--no-where and a value" in both.output and "Traceback" not in both.output
    nothing = ragstore("alter", "docs", "--table", "public.docs")
    assert nothing.exit_code != 0 and "nothing to change" in nothing.output
    shown = json.loads(ragstore("alter", "docs", "--table", "public.docs", "--no-package", "--json").output)
    assert (shown["package"], shown["metadata"], shown["queued"]) == (None, ["title"], 3)


def test_a_provider_that_hangs_then_fails_holds_up_its_own_family_only(conn: Any, dsn: str) -> None:
    gate = threading.Event()

    def hang_then_fail(headers: dict[str, str], raw: bytes) -> bytes:
        gate.wait(120)  # the provider does not answer until the test has seen the other family synced
        return b'{"error": {"message": "overloaded"}}'

    with StubServer(native_dim=8) as stub:
        backend = OpenAIBackend(base_url=stub.url, model="m", dim=8, api_key_env="NO_SUCH_KEY_VAR", max_retries=0)
        families.create_family(conn, "docs", backend, options={"base_url": stub.url, "max_retries": 0})
        families.create_family(conn, "tickets", OfflineBackend())
        make_table(conn)
        make_table(conn, "tickets", {5: "printer is on fire"})
        add_source(conn, "docs", "public.docs", id_column="id", text_columns=["body"])
        add_source(conn, "tickets", "public.tickets", id_column="id", text_columns=["body"])
        stub.queue(*[Reply(status=500, echo=hang_then_fail)] + [Reply(status=429) for _ in range(50)])
        stop = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            try:
                follow_workers(dsn, idle_seconds=0.2, stop=stop.is_set)
            except BaseException as exc:  # reported below
                errors.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        try:
            assert wait_for(lambda: chunk_ids(conn, "tickets") == ["tickets/5"])
            assert wait_for(lambda: len(stub.requests) == 1)  # docs' one request has reached the provider and hangs
            conn.execute("INSERT INTO public.tickets (id, body) VALUES (6, 'vpn drops hourly')")
            conn.commit()
            # docs' one request still hangs: only a worker of tickets' own can have synced this
            assert wait_for(lambda: chunk_ids(conn, "tickets") == ["tickets/5", "tickets/6"])
            assert not gate.is_set() and len(stub.requests) == 1 and chunk_ids(conn, "docs") == []
            gate.set()
            assert wait_for(lambda: any(s["backing_off"] == 3 for s in sync_status(conn)))  # not merely leased
            status = {s["family"]: s for s in sync_status(conn)}
            assert "500" in status["docs"]["last_error"] and status["docs"]["synced_keys"] == 0
            assert (status["tickets"]["queued"], status["tickets"]["synced_keys"]) == (0, 2)
        finally:
            gate.set()
            stop.set()
            thread.join()
    assert errors == []


def test_a_big_batch_keeps_its_lease_renewed_until_it_stops(conn: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from ragstore.sync import worker

    families.create_family(conn, "docs", OfflineBackend())
    make_table(conn)
    source, _ = add_source(conn, "docs", "public.docs", id_column="id", text_columns=["body"])
    claimed = conn.execute(
        "UPDATE ragstore.sync_queue SET not_before = now() + interval '1 second' RETURNING key, seq"
    ).fetchall()
    conn.commit()
    leases = "SELECT min(not_before) FROM ragstore.sync_queue"
    first = conn.execute(leases).fetchone()[0]
    conn.commit()
    monkeypatch.setattr(worker, "LEASE_SECONDS", 60.0 * 5 / 300)  # renewed every 0.2 s, to a 1 s lease
    renewal = worker.Renewal(conn, source.id, [k for k, _ in claimed], [s for _, s in claimed])
    try:

        def renewed() -> bool:
            later = conn.execute(leases).fetchone()[0]
            conn.commit()
            return bool(later > first)

        assert wait_for(renewed)
    finally:
        renewal.stop()
    renewal.stop()  # idempotent


@pytest.mark.slow
def test_a_backfill_of_a_big_table_into_an_empty_family_is_one_bulk_batch(conn: Any) -> None:
    from ragstore.ingest.writer import BULK_THRESHOLD

    families.create_family(conn, "docs", OfflineBackend())
    make_table(conn, rows={i: f"row {i} about topic {i % 17}" for i in range(1, BULK_THRESHOLD + 1)})
    add_source(conn, "docs", "public.docs", id_column="id", text_columns=["body"])
    counting = Counting()
    calls: list[int] = []
    original = counting.embed

    def embed(texts: Sequence[str]) -> Any:
        calls.append(len(texts))
        return original(texts)

    counting.embed = embed  # type: ignore[method-assign]
    report = run_once(conn, batch=100, backend=lambda _: counting)
    assert (report.written, report.embedded) == (BULK_THRESHOLD, BULK_THRESHOLD)
    assert len(chunk_ids(conn)) == BULK_THRESHOLD and queued(conn) == []
    index = conn.execute("SELECT count(*) FROM pg_indexes WHERE indexdef ILIKE '%hnsw%'").fetchone()[0]
    conn.commit()
    assert index >= 1  # the bulk load built the family's HNSW index at its end
    assert max(calls) > 100  # the texts went to the backend in batches bigger than a sync batch


def test_a_follower_of_a_family_that_stops_following_ends_quietly(synced_family: Any, dsn: str) -> None:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            follow_workers(dsn, ["docs"], idle_seconds=0.2)
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert wait_for(lambda: chunk_ids(synced_family) == ["docs/1", "docs/2", "docs/3"])
    families.drop_family(synced_family, "docs")
    synced_family.commit()
    assert wait_for(lambda: not thread.is_alive())
    assert errors == []


@pytest.fixture
def synced_family(conn: Any) -> Any:
    families.create_family(conn, "docs", OfflineBackend())
    make_table(conn)
    add_source(conn, "docs", "public.docs", id_column="id", text_columns=["body"])
    return conn


@pytest.mark.slow
def test_the_follow_command_syncs_each_commit_and_stops_on_sigterm(synced_family: Any, dsn: str) -> None:
    import signal
    import subprocess
    import sys

    command = [sys.executable, "-m", "ragstore.cli", "--dsn", dsn, "sync", "run", "--follow", "--workers", "2"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: chunk_ids(synced_family) == ["docs/1", "docs/2", "docs/3"])
        synced_family.execute("INSERT INTO public.docs (id, body) VALUES (4, 'zstd is fast')")
        synced_family.commit()
        assert wait_for(lambda: "docs/4" in chunk_ids(synced_family))
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "synced" in out and "Traceback" not in err


def test_cli_status_prints_one_line_per_table(synced_family: Any, dsn: str) -> None:
    shown = CliRunner().invoke(cli, ["--dsn", dsn, "sync", "status"])
    assert shown.exit_code == 0
    assert shown.output.splitlines() == [
        "docs\tpublic.docs\tqueued 3 (0 backing off, 0 being synced)\tlag "
        + shown.output.split("\tlag ")[1].split("\t")[0]
        + "\t0 rows synced\t-"
    ]
