"""Batches written on two connections at once (ragstore.ingest.parallel): the same table and counts as one
connection, a failure on either stops the run whole-batch, a missing second connection means one, and the
merge order that lets the two overlap (the HNSW work before the df row locks)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psycopg
import pytest

from ragstore import families
from ragstore.db.connection import connect, second_connection
from ragstore.embed.external import ExternalBackend
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import RagstoreError
from ragstore.ingest import parallel, writer
from ragstore.ingest.fast import Prepared
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from tests.toolkit.index import InterruptedOnThirdCall, records
from tests.toolkit.ingest_paths import DIM, content, rows, write_jsonl


@pytest.fixture
def pair(conn):
    for name in ("one", "two"):
        families.create_family(conn, name, ExternalBackend("mine", DIM), options={"dimensions": DIM})


@pytest.fixture
def helper_batches(monkeypatch) -> list[int]:
    """The batches each run's second writer committed (one entry per run that had one)."""
    seen: list[int] = []
    add = writer.Writer.add_counts

    def spy(self, other):
        seen.append(other.report.batches)
        add(self, other)

    monkeypatch.setattr(writer.Writer, "add_counts", spy)
    return seen


def parquet_of(records: list[dict], path: Path) -> Path:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    flat = pa.array(np.asarray([r["vector"] for r in records], dtype=np.float32).reshape(-1), type=pa.float32())
    columns = {key: pa.array([r[key] for r in records]) for key in ("chunk_id", "package_path", "text")}
    columns["vector"] = pa.FixedSizeListArray.from_arrays(flat, DIM)
    pq.write_table(pa.table(columns), path, row_group_size=64)
    return path


def counts(report) -> tuple[int, ...]:
    return (report.inserted, report.updated, report.unchanged, report.skipped, report.duplicates, report.pruned)


def changed_input(n: int) -> list[dict]:
    """``rows(n)`` with texts and vectors changed, packages moved, metadata changed, some new records."""
    out = rows(n)
    fresh = np.random.default_rng(9).standard_normal((n, DIM)).astype(np.float32)
    for i, row in enumerate(out):
        if i % 5 == 0:
            row["text"] += " changed"
            row["vector"] = fresh[i].tolist()
        elif i % 7 == 0:
            row["package_path"] = "pkg/moved"
        elif i % 11 == 0:
            row["metadata"] = {"n": -i}
    extra = rows(n + 40)[n:]
    for row in extra:
        row["chunk_id"] = "new-" + row["chunk_id"]
    return out + extra


@pytest.mark.slow
@pytest.mark.parametrize("bulk", [False, True], ids=["merge", "direct"])
def test_two_connections_leave_the_table_and_counts_of_one(conn, pair, tmp_path, monkeypatch, helper_batches, bulk):
    first = write_jsonl(tmp_path / "first.jsonl", rows(230))
    if bulk:  # a Parquet first load goes straight into the tables (writer.DirectCopy), not streamed
        monkeypatch.setattr(writer, "BULK_THRESHOLD", 10)
        first = parquet_of(rows(230), tmp_path / "first.parquet")
    second = write_jsonl(tmp_path / "second.jsonl", changed_input(230))
    reports = {}
    for family, connections in (("one", 1), ("two", 2)):
        reports[family] = [
            index_sources(conn, family, open_sources([str(src)]), batch_size=40, connections=connections, prune=True)
            for src in (first, second)
        ]
    assert [counts(r) for r in reports["one"]] == [counts(r) for r in reports["two"]]
    assert reports["two"][1].updated > 40 and reports["two"][1].inserted == 40
    assert content(conn, "one") == content(conn, "two") and len(content(conn, "one")) == 270
    # Both runs of family "two" had a second writer, and it wrote batches.
    assert len(helper_batches) == 2 and all(b > 0 for b in helper_batches)
    # The words' counts the triggers keep are those of one connection too.
    df = "SELECT lexeme, df FROM ragstore.chunk_term_df WHERE family = %s ORDER BY lexeme"
    assert conn.execute(df, ("one",)).fetchall() == conn.execute(df, ("two",)).fetchall()


def test_a_failure_on_one_connection_stops_the_run_with_whole_batches(conn, pair, tmp_path):
    # A database error in one batch (a trigger refusing one row): the run raises the mapped error, what
    # was committed is whole batches, and a rerun once the cause is gone converges to a clean run.
    conn.execute(
        """CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF NEW.chunk_id = 'c105' THEN RAISE EXCEPTION 'refused %', NEW.chunk_id; END IF; RETURN NEW; END $$"""
    )
    conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON ragstore.emb_two FOR EACH ROW EXECUTE FUNCTION refuse_boom()")
    conn.commit()
    src = write_jsonl(tmp_path / "v.jsonl", rows(300))
    with pytest.raises(RagstoreError, match="refused c105") as raised:
        index_sources(conn, "two", open_sources([str(src)]), batch_size=20)
    assert not isinstance(raised.value, psycopg.Error)
    conn.rollback()
    stored = conn.execute("SELECT count(*) FROM ragstore.emb_two").fetchone()[0]
    chunks = conn.execute("SELECT count(*) FROM ragstore.chunks WHERE family = 'two'").fetchone()[0]
    assert stored == chunks and stored % 20 == 0 and stored < 300
    conn.execute("DROP TRIGGER refuse ON ragstore.emb_two")
    conn.commit()
    index_sources(conn, "two", open_sources([str(src)]), batch_size=20)
    index_sources(conn, "one", open_sources([str(src)]), batch_size=20, connections=1)
    assert content(conn, "one") == content(conn, "two")


def test_an_interrupt_in_either_writer_leaves_whole_batches_and_a_rerun_converges(conn, tmp_path):
    families.create_family(conn, "docs", OfflineBackend())
    src = write_jsonl(tmp_path / "c.jsonl", records(100))
    with pytest.raises(KeyboardInterrupt):
        index_sources(conn, "docs", open_sources([str(src)]), backend=InterruptedOnThirdCall(), batch_size=20)
    conn.rollback()
    # Two batches before the third embedding call, and at most the one the other writer held.
    assert conn.execute("SELECT count(*) FROM ragstore.emb_docs").fetchone()[0] in (40, 60)
    report = index_sources(conn, "docs", open_sources([str(src)]), batch_size=20)
    assert report.inserted + report.unchanged == 100
    assert conn.execute("SELECT count(*) FROM ragstore.emb_docs").fetchone()[0] == 100


def test_without_a_second_connection_the_run_goes_on_with_one(conn, pg_admin_dsn, pair, tmp_path, helper_batches):
    # The database refuses new connections: the second one cannot be opened, and nothing is said.
    name = conn.info.dbname
    with psycopg.connect(pg_admin_dsn, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        try:
            with second_connection(conn) as other:
                assert other is None
            src = write_jsonl(tmp_path / "v.jsonl", rows(120))
            report = index_sources(conn, "two", open_sources([str(src)]), batch_size=20)
        finally:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
    assert report.inserted == 120 and helper_batches == []
    index_sources(conn, "one", open_sources([str(src)]), batch_size=20, connections=1)
    assert content(conn, "one") == content(conn, "two")


def test_the_second_connection_takes_the_sessions_role_search_path_and_timeout(conn):
    conn.execute("CREATE ROLE pw_writer")
    conn.execute("SET ROLE pw_writer")
    conn.execute("SET search_path = ragstore, public")
    conn.execute("SET statement_timeout = '7s'")
    conn.commit()
    with second_connection(conn) as other:
        assert other is not None and not other.autocommit
        row = other.execute(
            "SELECT current_user, session_user, current_setting('search_path'), current_setting('statement_timeout')"
        ).fetchone()
    assert row[0] == "pw_writer" and row[1] == conn.info.user
    assert row[2:] == ("ragstore, public", "7s")


def test_opening_the_second_connection_leaves_the_callers_transaction_open(conn):
    conn.execute("CREATE TEMP TABLE pw_pending (x int)")
    conn.execute("INSERT INTO pw_pending VALUES (1)")
    with second_connection(conn) as other:
        assert other is not None
    assert conn.info.transaction_status.name == "INTRANS"
    assert conn.execute("SELECT count(*) FROM pw_pending").fetchone() == (1,)


def test_the_store_lends_a_connection_of_its_pool_or_none(dsn, pair, helper_batches):
    from ragstore.store import Store

    with Store(dsn, pool_size=1) as store:
        with store._lend_second() as other:
            assert other is None
        assert store.index(rows(200), "one", batch_size=50).inserted == 200
    assert helper_batches == []  # the pool's only connection was the run's
    with Store(dsn, pool_size=2) as store:
        with store.connection(), store._lend_second() as other:
            assert other is not None and not other.autocommit
        # Taken back in autocommit, as the pool lends it.
        with store.connection() as a, store.connection() as b:
            assert a.autocommit and b.autocommit
        assert store.index(rows(200), "two", batch_size=50).inserted == 200
    assert len(helper_batches) == 1 and helper_batches[0] > 0


def test_the_last_batch_is_split_in_halves_and_nothing_is_lost():
    def batch(start: int, n: int) -> Prepared:
        ids = [f"c{i}" for i in range(start, start + n)]
        return Prepared(
            ids,
            ids,
            ["p"] * n,
            ids,
            [{}] * n,
            [None] * n,
            np.arange(n * 2, dtype=np.float32).reshape(n, 2),
            np.ones(n, bool),
        )

    out = list(parallel.halved_tail(iter([batch(0, 300), batch(300, 120)]), min_half=50))
    assert [len(b) for b in out] == [300, 60, 60]
    assert [i for b in out for i in b.ids] == [f"c{i}" for i in range(420)]
    assert out[2].vectors.tolist() == np.arange(240, dtype=np.float32).reshape(120, 2)[60:].tolist()
    assert [len(b) for b in parallel.halved_tail(iter([batch(0, 99)]), min_half=50)] == [99]
    assert list(parallel.halved_tail(iter([]))) == []


def run_while_held(dsn: str, hold: str, src: Path, seen: str) -> list[tuple[str, str]]:
    """Run a one-connection re-run of ``src`` into family "two" while another transaction holds what
    ``hold`` takes; the rows of ``seen`` (a query on the run's backend pid) the first time they are not
    empty while the run waits, [] if it never waited."""
    return act_while_held(
        dsn, hold, lambda run_conn: index_sources(run_conn, "two", open_sources([str(src)]), connections=1), seen
    )


def act_while_held(dsn: str, hold: str, act: Callable[[psycopg.Connection], object], seen: str) -> list[tuple]:
    """``act(conn)`` on a thread while another transaction holds what ``hold`` takes; the rows of ``seen``
    (a query on the backend pid of ``conn``, or of the connection ``act`` opened last when it opens its own)
    the first time they are not empty while it waits for a lock, [] if it never waited."""
    done = threading.Event()
    found: list[tuple] = []
    with connect(dsn) as holder, connect(dsn) as run_conn, connect(dsn) as watch:
        holder.execute(hold)
        worker = threading.Thread(target=lambda: (act(run_conn), done.set()))
        worker.start()
        for _ in range(400):
            waiting = watch.execute(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
            ).fetchall()
            if waiting:
                found = watch.execute(seen, (waiting[0][0],)).fetchall()
            watch.rollback()
            if found or done.is_set():
                break
            time.sleep(0.05)
        holder.rollback()
        worker.join(timeout=60)
    assert done.is_set()
    return found


def test_a_changed_records_vector_is_merged_before_the_df_locks_are_taken(conn, dsn, pair, tmp_path):
    """While another transaction holds a df row the chunk merge needs, the re-run's transaction has already
    written its family rows (their HNSW inserts, the slow part): it holds the family table's write lock
    while it waits. Merged the other way round, it would wait before touching the family table."""
    index_sources(conn, "two", open_sources([str(write_jsonl(tmp_path / "a.jsonl", rows(30)))]))
    changed = rows(30)
    changed[7]["text"] += " changed"  # a new word: its df row is inserted by the chunk merge's trigger
    changed[7]["vector"] = [0.5] * DIM
    src = write_jsonl(tmp_path / "b.jsonl", changed)
    # Another transaction inserting the same df row, not yet committed: the merge's upsert waits for it.
    hold = "INSERT INTO ragstore.chunk_term_df (family, lexeme, df) VALUES ('two', 'chang', 1)"
    held = run_while_held(
        dsn,
        hold,
        src,
        "SELECT c.relname::text, l.mode FROM pg_locks AS l JOIN pg_class AS c ON c.oid = l.relation "
        "WHERE l.pid = %s AND l.granted",
    )
    assert ("emb_two", "RowExclusiveLock") in held


def test_a_merge_that_inserts_and_updates_chunks_takes_the_df_lock_alone(conn, dsn, pair, tmp_path):
    """A batch whose chunk merge both inserts and updates (two df upserts, not one sorted sequence) waits
    for every other writer of the family holding df locks (the shared advisory lock), so two such merges
    cannot deadlock."""
    index_sources(conn, "two", open_sources([str(write_jsonl(tmp_path / "a.jsonl", rows(30)))]))
    src = write_jsonl(tmp_path / "b.jsonl", changed_input(30))
    hold = "SELECT pg_advisory_xact_lock_shared(hashtext('ragstore.chunk_term_df'), hashtext('two'))"
    waits = run_while_held(dsn, hold, src, "SELECT wait_event FROM pg_stat_activity WHERE pid = %s")
    assert waits == [("advisory",)]


HOLD_ALONE = "SELECT pg_advisory_xact_lock(hashtext('ragstore.chunk_term_df'), hashtext('two'))"


@pytest.mark.parametrize("how", ["prune", "delete_ids", "delete_packages", "delete_all", "drop", "delete_prefix"])
def test_deletes_of_chunks_wait_for_a_merge_that_holds_the_df_lock_alone(conn, dsn, pair, tmp_path, how):
    """A statement deleting chunks (a run's prune, an adapter's deletes, dropping the family) updates the
    words' counts in one sorted sequence, which could deadlock with a merge's two (inserts and updates): it
    takes the family's shared df lock first, and so waits while such a merge holds it alone. Then it
    deletes as before."""
    from ragstore.integrations._family import FamilyClient

    index_sources(conn, "two", open_sources([str(write_jsonl(tmp_path / "a.jsonl", rows(30)))]))
    fewer = write_jsonl(tmp_path / "b.jsonl", rows(20))
    deleted: list[object] = []

    def act(run_conn: psycopg.Connection) -> None:
        if how == "prune":
            deleted.append(index_sources(run_conn, "two", open_sources([str(fewer)]), prune=True).pruned)
        elif how == "drop":
            families.drop_family(run_conn, "two")
        elif how == "delete_prefix":  # ragstore delete --package
            from ragstore.families.chunks import delete_chunks

            deleted.append(delete_chunks(run_conn, "two", prefixes=["pkg/"]).chunks)
        else:
            client = FamilyClient("two", dsn, "mine", DIM)
            try:
                args = {"delete_ids": (["c000", "c001"],), "delete_packages": (["pkg/0"],), "delete_all": ()}[how]
                deleted.append(getattr(client, how)(*args))
            finally:
                client.close()

    waits = act_while_held(dsn, HOLD_ALONE, act, "SELECT wait_event FROM pg_stat_activity WHERE pid = %s")
    assert waits == [("advisory",)]
    left = conn.execute("SELECT count(*) FROM ragstore.chunks WHERE family = 'two'").fetchone()[0]
    conn.commit()
    # rows(30) spreads its chunks over pkg/0, pkg/1 and pkg/2, ten each.
    expected = {
        "prune": (10, 20),
        "delete_ids": (2, 28),
        "delete_packages": (10, 20),
        "delete_all": (30, 0),
        "delete_prefix": (30, 0),
    }
    assert (deleted[0] if deleted else None, left) == expected.get(how, (None, 0))
