"""Readers during writes and migrations.

Two reader processes search one family continuously, each on its own connection (one in autocommit, one
in transactions it rolls back after every search), cycling modes auto / exact / hybrid, while in turn:
(a) a large ``ragstore index`` run writes new and changed chunks, (b) ``ragstore index --prune`` removes
half of some packages, (c) ``ragstore family migrate`` re-embeds the family with another backend of
another dimension (offline 16-d -> openai 32-d, against the local stub server) and swaps it in.

Proves: no search raises; none returns an empty or partial answer (always k hits, well-formed, each hit's
text and package those of its chunk id); none is blocked behind a writer: PostgreSQL itself is asked, not a
clock. Every reader runs with a lock_timeout (ten times the one the migration's drop of the old table waits
with), so a search held on a lock for longer fails with LockNotAvailable (an error, counted as such), and
a monitor asks ``pg_blocking_pids`` about the readers' backends throughout: the only statement ever seen
blocking a reader is the drop of the swapped-out table (it waits at most its own short lock_timeout a
try). No search
started after a write committed returns what that write replaced or removed. Then every table's content
hash equals that of a clean run of the same writes with no readers. Search latencies (each against the
idle p95 of its mode and backend) are printed, never asserted: speed is the benchmarks' business.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, NamedTuple

import psycopg
import pytest

from ragstore import families
from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend
from ragstore.embed.openai import OpenAIBackend
from ragstore.families.migrate import migrate_family
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from tests.openai_stub import StubServer
from tests.reliability.helpers import (
    Poller,
    chunk,
    cli_env,
    consistent,
    family_data_hashes,
    run_cli,
    write_jsonl,
)
from tests.toolkit.readers_during_writes import APP, MODES, K, _as_reader, _problems

pytestmark = pytest.mark.reliability

ROOT = Path(__file__).resolve().parents[2]
SOAK = os.environ.get("RAGSTORE_SOAK") == "1"
ROWS = 20_000 if SOAK else 3_000  # initial chunks, 100 per package
NEW = ROWS  # the large run adds as many again ...
CHANGED_EVERY = 3  # ... and rewrites every third existing chunk
PRUNED_PACKAGES = 20 if SOAK else 5  # the prune run keeps the even chunks of the first packages
IDLE_SECONDS = 10.0 if SOAK else 3.0
READERS = 2
# A reader waits on a lock at most this long, then its search fails with LockNotAvailable. Ten times the
# drop's own lock_timeout: a DROP queued ahead of a reader gives up after DROP_LOCK_TIMEOUT, and a writer
# holding a lock a reader needs for a whole write (a batch, a prune, a swap) would hold it far longer.
STUB_DIM, STUB_MODEL = 32, "stub-embed-32"


def _version(i: int) -> int:
    """The version of chunk ``i`` once the large run has rewritten every third one."""
    return 1 if i < ROWS and i % CHANGED_EVERY == 0 else 0


def _start_readers(dsn: str, tmp_path: Path) -> tuple[list[subprocess.Popen[bytes]], Path, list[Path]]:
    stop = tmp_path / "stop"
    outs, procs = [], []
    for r in range(READERS):
        out, ready = tmp_path / f"reader{r}.json", tmp_path / f"reader{r}.ready"
        args = (dsn, str(out), str(stop), str(ready), r, r % 2 == 0)
        code = f"from tests.toolkit.readers_during_writes import _reader; _reader(*{args!r})"
        procs.append(subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=cli_env()))
        outs.append(out)
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"reader{r}.ready").exists() for r in range(READERS)):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "a reader did not start"
        time.sleep(0.05)
    return procs, stop, outs


# One snapshot of the lock table for every question the monitor asks: the lock a reader waits for, the
# blocker's locks on that same object, and every ACCESS EXCLUSIVE lock the blocker holds or waits for.
# pg_blocking_pids() is a snapshot of its own: a blocker that let go in between has no lock on the reader's
# object in ``locks`` and is left out (it no longer blocked anyone).
_BLOCKINGS = """
WITH locks AS MATERIALIZED (SELECT * FROM pg_locks),
waits AS (
    SELECT r.pid, w.locktype, w.database, w.relation, w.page, w.tuple, w.transactionid, w.classid, w.objid,
           w.objsubid, w.mode
    FROM pg_stat_activity AS r
    JOIN locks AS w ON w.pid = r.pid AND NOT w.granted
    WHERE r.application_name = %s
)
SELECT coalesce(w.relation::regclass::text, w.locktype) AS waits_on, w.mode AS wants,
       array_agg(DISTINCT h.mode || CASE WHEN h.granted THEN ' held' ELSE ' awaited' END) AS holds,
       coalesce((SELECT array_agg(DISTINCT x.relation::regclass::text) FROM locks AS x
                  WHERE x.pid = b.pid AND x.locktype = 'relation' AND x.mode = 'AccessExclusiveLock'),
                '{}') AS exclusive,
       b.state, b.query
FROM waits AS w
CROSS JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS blocker(pid)
JOIN pg_stat_activity AS b ON b.pid = blocker.pid
JOIN locks AS h ON h.pid = b.pid AND h.locktype = w.locktype
     AND h.database IS NOT DISTINCT FROM w.database AND h.relation IS NOT DISTINCT FROM w.relation
     AND h.page IS NOT DISTINCT FROM w.page AND h.tuple IS NOT DISTINCT FROM w.tuple
     AND h.transactionid IS NOT DISTINCT FROM w.transactionid AND h.classid IS NOT DISTINCT FROM w.classid
     AND h.objid IS NOT DISTINCT FROM w.objid AND h.objsubid IS NOT DISTINCT FROM w.objsubid
GROUP BY w.relation, w.locktype, w.mode, b.pid, b.state, b.query
"""


class Blocking(NamedTuple):
    """A reader seen waiting behind another backend: the phase of the test then, the object the reader
    waits for (a table, or the lock type) and the mode it wants, what the blocker holds or waits for on that
    same object, every table the blocker holds (or waits for) an ACCESS EXCLUSIVE lock on, and the blocker's
    statement (its current one when active; otherwise only its latest, which need not be the one that took
    the lock: a transaction that dropped a table and then ran ``DEALLOCATE ALL`` still holds the drop's lock)."""

    phase: str
    waits_on: str
    wants: str
    holds: tuple[str, ...]
    exclusive: tuple[str, ...]
    statement: str


class _BlockingMonitor(Poller):
    """Asks PostgreSQL, every few milliseconds until stopped, which backends block the readers' (found by
    their application_name) and by which locks: ``seen`` holds each distinct :class:`Blocking` once.
    ``phase`` is what the test is doing (it sets it), recorded with each observation."""

    interval = 0.005

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn)
        self.seen: set[Blocking] = set()
        self.phase = ""

    def poll(self, conn: psycopg.Connection[Any]) -> None:
        before = self.phase
        rows = conn.execute(_BLOCKINGS, (APP,)).fetchall()
        after = self.phase  # a poll that overlapped a change of phase is recorded as both: "a..b"
        phase = before if before == after else f"{before}..{after}"
        for waits_on, wants, holds, exclusive, state, query in rows:
            statement = query if state == "active" else f"({state}; latest statement) {query}"
            self.seen.add(Blocking(phase, waits_on, wants, tuple(sorted(holds)), tuple(sorted(exclusive)), statement))


def not_the_drop_of(seen: set[Blocking], table: str, phase: str) -> list[Blocking]:
    """The blockings in ``seen`` that are not the drop of the swapped-out ``table`` (schema-qualified) during
    ``phase``: the drop is the only statement there that takes (or queues for) an ACCESS EXCLUSIVE lock on
    that table, so a blocker holding or awaiting one is it, whatever the reader waits for (the drop also
    locks ragstore.chunks, where the foreign key's triggers live) and whatever the blocker ran last."""
    return sorted(b for b in seen if phase not in b.phase.split("..") or table not in b.exclusive)


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) >= 2 else values[0]


def _cli_ok(args: list[str]) -> dict[str, Any]:
    done = run_cli(args, timeout=300)
    assert done.returncode == 0 and done.stderr == "", (args, done.returncode, done.stderr)
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@pytest.mark.slow
def test_searches_stay_whole_and_fast_during_index_prune_and_migration(
    dsn: str, clean_dsn: str, tmp_path: Path
) -> None:
    initial = write_jsonl(tmp_path / "initial.jsonl", (chunk(i) for i in range(ROWS)))
    large = write_jsonl(
        tmp_path / "large.jsonl",
        [chunk(i) for i in range(ROWS, ROWS + NEW)] + [chunk(i, 1) for i in range(0, ROWS, CHANGED_EVERY)],
    )
    kept = [i for i in range(PRUNED_PACKAGES * 100) if i % 2 == 0]
    pruned = {f"doc-{i:06d}" for i in range(PRUNED_PACKAGES * 100) if i % 2}
    partial = write_jsonl(tmp_path / "partial.jsonl", (chunk(i, _version(i)) for i in kept))
    changed = {f"doc-{i:06d}" for i in range(0, ROWS, CHANGED_EVERY)}

    with StubServer(native_dim=STUB_DIM) as stub:
        # The clean run: the same writes, one after the other, nobody reading.
        with connect(clean_dsn) as conn:
            families.create_family(conn, "docs", OfflineBackend())
            for path, prune in ((initial, False), (large, False), (partial, True)):
                index_sources(conn, "docs", open_sources([str(path)]), prune=prune)
            with OpenAIBackend(base_url=stub.url, model=STUB_MODEL) as backend:
                migrate_family(conn, "docs", backend, options={"base_url": stub.url})
        with connect(dsn) as conn:
            old_table = f"ragstore.{families.create_family(conn, 'docs', OfflineBackend()).table}"
            index_sources(conn, "docs", open_sources([str(initial)]))

        procs, stop, outs = _start_readers(dsn, tmp_path)
        phases: list[tuple[str, float]] = []
        try:
            with _BlockingMonitor(dsn) as monitor:

                def enter(phase: str) -> None:
                    monitor.phase = phase  # before the phase's first statement: no blocking is seen early
                    phases.append((phase, time.monotonic()))

                enter("idle")
                time.sleep(IDLE_SECONDS)
                base = ["--dsn", dsn]
                enter("index")
                big = _cli_ok([*base, "index", "docs", str(large), "--json", "--batch-size", "500"])
                enter("prune")
                cut = _cli_ok([*base, "index", "docs", str(partial), "--prune", "--json"])
                enter("migrate")
                moved = _cli_ok(
                    [*base, "family", "migrate", "docs", "--backend", "openai", "--model", STUB_MODEL,
                     "--base-url", stub.url, "--json", "--batch-size", "256"]
                )  # fmt: skip
                enter("idle-after")
                time.sleep(IDLE_SECONDS)
                enter("end")
        finally:
            stop.touch()
            for p in procs:
                p.wait(timeout=60)
        assert [p.returncode for p in procs] == [0] * READERS
        records = [rec for out in outs for rec in json.loads(out.read_text(encoding="utf-8"))]

    assert (big["inserted"], big["updated"]) == (NEW, len(changed))
    assert (cut["pruned"], cut["unchanged"]) == (len(pruned), len(kept))
    assert moved["swapped"] and moved["written"] == ROWS + NEW - len(pruned)

    def phase_of(started: float) -> str:
        return [name for name, at in phases if at <= started][-1] if started >= phases[0][1] else "warm-up"

    by_phase: dict[str, list[list[Any]]] = defaultdict(list)
    for rec in records:
        by_phase[phase_of(rec[0])].append(rec)
    idle: dict[tuple[str, str], float] = {}
    for name in ("idle", "idle-after"):
        groups: dict[tuple[str, str], list[float]] = defaultdict(list)
        for _started, seconds, mode, model, *_ in by_phase[name]:
            groups[(mode, model)].append(seconds)
        idle.update({key: _p95(values) for key, values in groups.items()})
    assert {model for _, model in idle} == {"fingerprint-v1", STUB_MODEL}, idle

    def idle_p95(mode: str, model: str) -> float:
        return max(p for (m, mo), p in idle.items() if m == mode and (mo == model or model == "?"))

    ends = {name: phases[n + 1][1] for n, (name, _) in enumerate(phases[:-1])}  # when the next one starts
    errors, problems, stale = [], [], []
    worst: dict[str, tuple[float, float]] = {}
    for name in ("index", "prune", "migrate", "idle-after"):
        assert len(by_phase[name]) >= 3 * READERS, f"too few searches during {name}: {len(by_phase[name])}"
        for started, seconds, mode, model, error, wrong, got in by_phase[name]:
            if error:
                errors.append((name, mode, error))
            problems += [(name, mode, p) for p in wrong]
            p95 = idle_p95(mode, model)
            if name not in worst or seconds / p95 > worst[name][0] / worst[name][1]:
                worst[name] = (seconds, p95)
            for hit in got:
                cid, version = hit.rsplit(":", 1)
                if started > ends["prune"] and cid in pruned:
                    stale.append((name, "pruned", cid))
                if started > ends["index"] and cid in changed and version != "1":
                    stale.append((name, "old version", cid))

    counts = {name: len(recs) for name, recs in by_phase.items()}
    idle_ms = {f"{m}/{mo}": round(p * 1000, 1) for (m, mo), p in sorted(idle.items())}
    worst_ms = {n: f"{s * 1000:.1f} ms = {s / p:.1f}x" for n, (s, p) in worst.items()}
    print(
        f"readers-during-writes: {len(records)} searches {counts}, {len(errors)} errors, {len(problems)} bad "
        f"answers, readers blocked by {sorted(monitor.seen)} ({monitor.polls} polls), idle p95 ms {idle_ms}, "
        f"worst vs its idle p95 per phase {worst_ms}, "
        f"migration {moved['seconds']}s"
    )
    assert errors == [], errors[:5]
    assert problems == [], problems[:5]
    assert stale == [], stale[:5]
    assert monitor.polls > 100  # it watched the whole run
    # Only the drop of the swapped-out table ever blocks a reader (and only briefly: each of its tries waits
    # at most DROP_LOCK_TIMEOUT), identified by the lock it holds or queues for, not by its latest statement.
    assert not_the_drop_of(monitor.seen, old_table, "migrate") == [], monitor.seen

    # Nothing lost, nothing half-written: the exact expected rows, every embedding matching its chunk,
    # and every table's content equal to the clean run's.
    with psycopg.connect(dsn) as conn:
        got_rows = dict(conn.execute("SELECT chunk_id, metadata->>'v' FROM ragstore.chunks").fetchall())
        table = conn.execute("SELECT table_name FROM ragstore.families WHERE name = 'docs'").fetchone()[0]
    want = {f"doc-{i:06d}": str(_version(i)) for i in range(ROWS + NEW) if f"doc-{i:06d}" not in pruned}
    assert got_rows == want
    assert consistent(dsn, table) == []
    assert family_data_hashes(dsn) == family_data_hashes(clean_dsn)


def test_a_reader_blocked_behind_a_writer_is_seen_and_fails(dsn: str, tmp_path: Path) -> None:
    """The two checks above can fail: a writer holding the family's table for longer than a reader may wait
    makes the reader's search fail (LockNotAvailable), and the monitor names the writer's lock, which the
    main scenario's check refuses (it is not the drop of a swapped-out table)."""
    import threading

    from ragstore.errors import RagstoreError
    from ragstore.search import search

    with connect(dsn) as conn:
        families.create_family(conn, "docs", OfflineBackend())
        index_sources(conn, "docs", open_sources([str(write_jsonl(tmp_path / "c.jsonl", map(chunk, range(50))))]))
    outcome: dict[str, Any] = {}
    with connect(dsn, autocommit=True) as reader, psycopg.connect(dsn) as writer:
        _as_reader(reader)
        assert len(search(reader, "docs", "w1 chunk", k=K, mode="exact")) == K
        writer.execute("LOCK TABLE ragstore.emb_docs IN ACCESS EXCLUSIVE MODE")
        released = threading.Event()

        def read() -> None:
            try:
                search(reader, "docs", "w2 chunk", k=K, mode="exact")
            except RagstoreError as exc:
                outcome["error"] = f"{type(exc).__name__}: {exc}"
            outcome["writer still held the lock"] = not released.is_set()

        with _BlockingMonitor(dsn) as monitor:
            monitor.phase = "migrate"
            thread = threading.Thread(target=read)
            thread.start()
            _until(lambda: monitor.seen, "the monitor to see the reader blocked")
            thread.join(timeout=60)
        writer.rollback()
        released.set()
    held = [b for b in monitor.seen if b.waits_on == "ragstore.emb_docs"]
    assert held and all("AccessExclusiveLock held" in b.holds for b in held), monitor.seen
    assert any("LOCK TABLE" in b.statement for b in held), monitor.seen
    # The live table locked by a writer is not the drop of the old one: the scenario's check names it.
    assert not_the_drop_of(monitor.seen, "ragstore.emb_docs_old", "migrate") == sorted(monitor.seen)
    assert "error" in outcome and outcome["writer still held the lock"], outcome


def test_the_monitor_names_the_lock_a_blocker_holds_not_its_latest_statement(dsn: str, tmp_path: Path) -> None:
    """A transaction that dropped a table and went on to another statement (psycopg runs ``DEALLOCATE
    ALL`` after a DROP when it has prepared statements) still holds the drop's lock: the monitor sees the
    drop by that lock, where the text of the blocker's latest statement says ``DEALLOCATE ALL``."""
    import threading

    from ragstore.errors import RagstoreError
    from ragstore.search import search

    with connect(dsn) as conn:
        families.create_family(conn, "docs", OfflineBackend())
        index_sources(conn, "docs", open_sources([str(write_jsonl(tmp_path / "c.jsonl", map(chunk, range(50))))]))
    outcome: dict[str, Any] = {}
    with connect(dsn, autocommit=True) as reader, psycopg.connect(dsn) as dropper:
        _as_reader(reader)
        assert len(search(reader, "docs", "w1 chunk", k=K, mode="exact")) == K
        dropper.execute("DROP VIEW ragstore.vectors_docs")  # the family's view reads the table
        dropper.execute("DROP TABLE ragstore.emb_docs")
        dropper.execute("DEALLOCATE ALL")  # the latest statement; the drop's locks are still held

        def read() -> None:
            try:
                search(reader, "docs", "w2 chunk", k=K, mode="exact")
            except RagstoreError as exc:
                outcome["error"] = f"{type(exc).__name__}: {exc}"

        with _BlockingMonitor(dsn) as monitor:
            monitor.phase = "migrate"
            thread = threading.Thread(target=read)
            thread.start()
            _until(lambda: monitor.seen, "the monitor to see the reader blocked")
            thread.join(timeout=60)
        dropper.rollback()
    assert monitor.seen and all(b.statement.endswith("DEALLOCATE ALL") for b in monitor.seen), monitor.seen
    assert not_the_drop_of(monitor.seen, "ragstore.emb_docs", "migrate") == [], monitor.seen
    assert not_the_drop_of(monitor.seen, "ragstore.emb_docs", "index") == sorted(monitor.seen)  # not then
    assert "error" in outcome, outcome


def _waiting_for_locks(dsn: str) -> list[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT query FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchall()
    return [r[0] for r in rows]


def _until(check: Any, what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)
    return value


@pytest.mark.parametrize("mode", MODES)
def test_a_search_queued_behind_the_migration_swap_answers_from_the_new_table(
    dsn: str, tmp_path: Path, mode: str
) -> None:
    """The race the continuous readers above can only hit by chance, made certain.

    A long-lived reader (its family cached by one search) starts a search while the drop of the swapped-out
    table waits for the lock of an open transaction. The swap has committed; the drop runs in a transaction
    of its own with a short lock_timeout and retries, so the search never queues behind it for long: it
    answers k hits (from the old table, still whole, or from the new one after re-resolving), and the old
    table is dropped once the blocking transaction ends.
    """
    import threading

    from ragstore.search import search

    rows = 300
    with connect(dsn) as conn:
        families.create_family(conn, "docs", OfflineBackend())
        index_sources(conn, "docs", open_sources([str(write_jsonl(tmp_path / "c.jsonl", map(chunk, range(rows))))]))
    outcome: dict[str, Any] = {}

    with StubServer(native_dim=STUB_DIM) as stub, connect(dsn, autocommit=True) as reader:
        assert len(search(reader, "docs", "w1 w2 chunk", k=K, mode=mode)) == K
        blocker = psycopg.connect(dsn)
        blocker.execute("SELECT 1 FROM ragstore.emb_docs LIMIT 1")  # holds ACCESS SHARE until rollback

        def migrate() -> None:
            with connect(dsn) as conn, OpenAIBackend(base_url=stub.url, model=STUB_MODEL) as backend:
                outcome["migration"] = migrate_family(conn, "docs", backend, options={"base_url": stub.url})

        def read() -> None:
            try:
                outcome["hits"] = search(reader, "docs", "w3 w4 chunk", k=K, mode=mode)
            except Exception as exc:
                detail = getattr(getattr(exc.__cause__, "diag", None), "message_detail", None)
                outcome["error"] = f"{type(exc).__name__}: {exc}" + (f" ({detail})" if detail else "")

        threads = [threading.Thread(target=migrate), threading.Thread(target=read)]
        try:
            threads[0].start()
            _until(lambda: any("DROP TABLE" in q for q in _waiting_for_locks(dsn)), "the old table's DROP to wait")
            threads[1].start()
            threads[1].join(timeout=30)
            assert not threads[1].is_alive(), "the search stalled behind the drop of the old table"
        finally:
            blocker.rollback()
            blocker.close()
            for t in threads:
                t.join(timeout=90)
    assert outcome["migration"].swapped and outcome["migration"].old_table_dropped
    assert "error" not in outcome, outcome["error"]
    assert _problems(outcome["hits"]) == []
