"""The retry policies of the bulk writer and the family migration (tenacity), against a real server."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from psycopg import errors as pgerrors

from ragstore.families import migrate as family_migrate
from ragstore.ingest import writer


def _merge_failing(errors: list[Exception]) -> tuple[list[int], Any]:
    """A merge that raises ``errors`` one per call, then returns "merged"; and the list of its calls."""
    calls: list[int] = []

    def merge() -> str:
        calls.append(1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return "merged"

    return calls, merge


def _retry(merge: Any) -> Any:
    return writer._transient_retry().copy(sleep=lambda _s: None)(merge)


def test_writer_retries_a_transient_conflict_then_succeeds() -> None:
    calls, merge = _merge_failing([pgerrors.DeadlockDetected("deadlock"), pgerrors.SerializationFailure("serialize")])
    assert _retry(merge) == "merged"
    assert len(calls) == 3


def test_writer_gives_up_after_max_retries_with_the_last_error() -> None:
    errors: list[Exception] = [pgerrors.DeadlockDetected(f"try {n}") for n in range(writer.MAX_RETRIES)]
    calls, merge = _merge_failing(errors)
    with pytest.raises(pgerrors.DeadlockDetected, match=f"try {writer.MAX_RETRIES - 1}"):
        _retry(merge)
    assert len(calls) == writer.MAX_RETRIES


def test_writer_does_not_retry_other_database_errors() -> None:
    calls, merge = _merge_failing([pgerrors.UniqueViolation("duplicate key")])
    with pytest.raises(pgerrors.UniqueViolation):
        _retry(merge)
    assert len(calls) == 1


def test_migration_lock_waits_its_patience_then_gives_up_and_is_taken_once_free(conn: Any, dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as other:
        assert family_migrate._try_lock(other, "docs")
        started = time.monotonic()
        assert family_migrate._try_lock(conn, "docs", patience=0.3) is False
        assert time.monotonic() - started >= 0.3  # it waited its patience (no upper bound: a loaded machine)
        other.execute("SELECT pg_advisory_unlock_all()")
    assert family_migrate._try_lock(conn, "docs", patience=0.3) is True


def test_old_table_drop_gives_up_while_busy_and_drops_once_free(
    conn: Any, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn.execute("CREATE TABLE ragstore.retired_old (id int)")
    conn.commit()
    monkeypatch.setattr(family_migrate, "DROP_TRIES", 3)
    with psycopg.connect(dsn) as other:
        other.execute("LOCK TABLE ragstore.retired_old IN ACCESS SHARE MODE")
        assert family_migrate._drop_old_table(conn, "retired_old") is False
        other.rollback()
    assert family_migrate._drop_old_table(conn, "retired_old") is True
    assert conn.execute("SELECT to_regclass('ragstore.retired_old')").fetchone() == (None,)


def test_a_batch_retried_after_a_deadlock_merges_alone_under_the_exclusive_df_lock(
    conn: Any, dsn: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Merges of overlapping batches can deadlock on rows (retried); the retry must not be able to deadlock
    # again, so it takes the family's df lock exclusively, first in its transaction: here it waits for another
    # transaction holding the shared lock, then writes everything, having retried once.
    import json
    import threading

    from ragstore import families
    from ragstore.embed.offline import OfflineBackend
    from ragstore.ingest.readers import open_sources
    from ragstore.ingest.run import index_sources

    families.create_family(conn, "docs", OfflineBackend())
    path = tmp_path / "in.jsonl"
    records = ({"chunk_id": f"c{i}", "package_path": "p.md", "text": f"text {i}"} for i in range(20))
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    original = writer.Merge.write
    calls: list[bool] = []

    def merge_once_deadlocked(self: writer.Merge, *args: Any, alone: bool = False, **kwargs: Any) -> Any:
        calls.append(alone)
        if len(calls) == 1:
            raise pgerrors.DeadlockDetected("deadlock detected")
        return original(self, *args, alone=alone, **kwargs)

    monkeypatch.setattr(writer.Merge, "write", merge_once_deadlocked)
    results: list[Any] = []
    with psycopg.connect(dsn) as other:
        other.execute("SELECT pg_advisory_xact_lock_shared(hashtext('ragstore.chunk_term_df'), hashtext('docs'))")
        pid = conn.info.backend_pid
        thread = threading.Thread(target=lambda: results.append(index_sources(conn, "docs", open_sources([str(path)]))))
        thread.start()
        waiting = None
        for _ in range(600):  # the retry waits for the lock `other` holds, in exclusive mode
            waiting = other.execute(
                "SELECT mode FROM pg_locks WHERE pid = %s AND locktype = 'advisory' AND NOT granted", (pid,)
            ).fetchone()
            if waiting or not thread.is_alive():
                break
            time.sleep(0.05)
        assert waiting == ("ExclusiveLock",)
        assert thread.is_alive()
        other.rollback()
    thread.join(timeout=120)
    assert calls == [False, True]
    report = results[0]
    assert (report.inserted, report.retries) == (20, 1)
    assert conn.execute("SELECT count(*) FROM ragstore.chunks WHERE family = 'docs'").fetchone() == (20,)
