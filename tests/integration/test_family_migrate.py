"""Family model migration: backfill, swap, resume, dry run, conflicts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from ragstore import families
from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import Conflict, InvalidInput
from ragstore.families.migrate import abort_migration, dry_run, migrate_family
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from tests.toolkit.family_migrate import HashBackend, index, vectors_for, write_jsonl

ROOT = Path(__file__).resolve().parents[2]


def serving(conn: Any) -> tuple[str, str, int, str]:
    row = conn.execute("SELECT table_name, model, dim, state FROM ragstore.families WHERE name = 'docs'").fetchone()
    conn.commit()
    return row[0], row[1], int(row[2]), row[3]


@pytest.fixture
def docs(conn: Any, tmp_path: Path) -> Path:
    families.create_family(conn, "docs", OfflineBackend())
    src = write_jsonl(tmp_path / "c.jsonl", 40)
    index(conn, src)
    return src


def test_migration_swaps_in_a_full_indexed_table_and_drops_the_old_one(conn: Any, docs: Path) -> None:
    target = HashBackend(dim=24)
    report = migrate_family(conn, "docs", target, batch_size=7)
    table, model, dim, state = serving(conn)
    assert (model, dim, state, report.swapped) == ("hash-a", 24, "ready", True)
    assert table.startswith("emb_docs_") and report.written == 40 and report.embedded == 40
    assert conn.execute("SELECT to_regclass('ragstore.emb_docs')").fetchone() == (None,)
    got = conn.execute(f"SELECT chunk_id, embedding FROM ragstore.{table} ORDER BY chunk_id").fetchall()
    texts = [conn.execute("SELECT text FROM ragstore.chunks WHERE chunk_id = %s", (c,)).fetchone()[0] for c, _ in got]
    assert len(got) == 40
    assert np.allclose(np.stack([v.to_numpy() for _, v in got]), vectors_for("hash-a", 24, texts))
    stats = families.family_stats(conn, "docs")
    assert stats.hnsw_index is not None and "target" not in stats.family.options


def test_index_after_migration_uses_the_new_model_and_re_embeds_nothing(conn: Any, docs: Path) -> None:
    target = HashBackend()
    migrate_family(conn, "docs", target)
    again = HashBackend()
    report = index(conn, docs, backend=again)
    assert report.unchanged == 40 and again.calls == []


def test_limits_are_checked_before_anything_is_written(conn: Any, docs: Path) -> None:
    with pytest.raises(InvalidInput, match="4,000"):
        migrate_family(conn, "docs", HashBackend(dim=4001))
    assert serving(conn) == ("emb_docs", "fingerprint-v1", 16, "ready")


def test_a_family_over_2000_dims_is_migrated_to_halfvec(conn: Any, docs: Path) -> None:
    migrate_family(conn, "docs", HashBackend(dim=2048))
    family = families.get_family(conn, "docs")
    column = conn.execute(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = %s::regclass AND attname = 'embedding'",
        (f"ragstore.{family.table}",),
    ).fetchone()
    assert family.vector_type == "halfvec" and column == ("halfvec(2048)",)


def test_same_model_is_refused_and_another_target_conflicts_with_a_recorded_one(conn: Any, docs: Path) -> None:
    with pytest.raises(InvalidInput, match="already holds"):
        migrate_family(conn, "docs", OfflineBackend())
    broken = HashBackend(model="hash-b")
    broken.embed = lambda texts: (_ for _ in ()).throw(RuntimeError("provider down"))  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        migrate_family(conn, "docs", broken)
    assert serving(conn)[3] == "migrating"
    with pytest.raises(Conflict, match="hash-b"):
        migrate_family(conn, "docs", HashBackend(model="hash-c"))
    family = abort_migration(conn, "docs")
    assert family.state == "ready" and "target" not in family.options
    leftovers = conn.execute("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'emb_docs_%'").fetchone()
    assert leftovers == (0,)


def test_changes_made_during_the_backfill_are_caught_up(conn: Any, dsn: str, docs: Path, tmp_path: Path) -> None:
    target = HashBackend()
    edited = write_jsonl(tmp_path / "d.jsonl", 40)
    text = edited.read_text().replace('"text c 3"', '"an edited text"')
    edited.write_text(text + json.dumps({"chunk_id": "new1", "package_path": "pkg/a", "text": "late"}) + "\n")
    done: list[bool] = []

    def progress(n: int) -> None:
        if not done:  # after the first committed batch, a writer changes the old table
            done.append(True)
            with connect(dsn) as other:
                index_sources(other, "docs", open_sources([str(edited)]), backend=OfflineBackend())

    migrate_family(conn, "docs", target, batch_size=5, progress=progress)
    table = serving(conn)[0]
    rows = dict(conn.execute(f"SELECT chunk_id, embedding FROM ragstore.{table}").fetchall())
    assert len(rows) == 41
    assert np.allclose(rows["c0003"].to_numpy(), vectors_for("hash-a", 8, ["an edited text"])[0])
    assert np.allclose(rows["new1"].to_numpy(), vectors_for("hash-a", 8, ["late"])[0])


def test_dry_run_counts_and_estimates_without_writing(conn: Any, docs: Path) -> None:
    target = HashBackend(delay=0.01)
    report = dry_run(conn, "docs", target, sample=8)
    assert (report.chunks, report.to_embed, report.sample) == (40, 40, 8)
    assert report.estimated_seconds >= 40 * 0.01 / 8 * 0.9
    assert serving(conn) == ("emb_docs", "fingerprint-v1", 16, "ready")


def test_concurrent_reader_never_sees_an_empty_or_half_filled_family(conn: Any, dsn: str, docs: Path) -> None:
    import threading

    seen: list[tuple[str, int, int]] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        # The protocol of a search: resolve the table from the registry per query; re-resolve once if the
        # swap dropped it between the two statements.
        try:
            with psycopg.connect(dsn, autocommit=True) as rc:
                while not stop.is_set():
                    for _attempt in range(2):
                        table, model = rc.execute(
                            "SELECT table_name, model FROM ragstore.families WHERE name = 'docs'"
                        ).fetchone()
                        try:
                            n, models = rc.execute(
                                f'SELECT count(*), count(DISTINCT model) FROM ragstore."{table}" WHERE model = %s',
                                (model,),
                            ).fetchone()
                        except psycopg.errors.UndefinedTable:
                            continue
                        seen.append((model, int(n), int(models)))
                        break
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        while len(seen) < 5:
            time.sleep(0.01)
        migrate_family(conn, "docs", HashBackend(delay=0.005), batch_size=4)
        after = len(seen)
        while len(seen) < after + 5 and thread.is_alive():
            time.sleep(0.01)
    finally:
        stop.set()
        thread.join()
    assert not errors
    assert {m for m, _, _ in seen} == {"fingerprint-v1", "hash-a"}
    assert all(n == 40 and models == 1 for _, n, models in seen)


@pytest.mark.reliability
def test_migration_resumes_after_kill_9(conn: Any, dsn: str, docs: Path) -> None:
    code = f"from tests.toolkit.family_migrate import _child; _child({dsn!r})"
    child = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=os.environ.copy())
    try:
        deadline = time.monotonic() + 60
        written = 0
        while time.monotonic() < deadline and written < 8:
            time.sleep(0.05)
            state = serving(conn)[3]
            if state == "migrating":
                target = families.get_family(conn, "docs").options["target"]["table"]
                written = conn.execute(f'SELECT count(*) FROM ragstore."{target}"').fetchone()[0]
                conn.commit()
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait()
    assert child.returncode == -signal.SIGKILL and 8 <= written < 40
    assert serving(conn)[0] == "emb_docs" and serving(conn)[3] == "migrating"
    present = conn.execute(f'SELECT count(*) FROM ragstore."{target}"').fetchone()[0]
    conn.commit()
    backend = HashBackend()
    report = migrate_family(conn, "docs", backend, batch_size=4)
    assert report.resumed and report.swapped and report.written == 40 - present
    assert len(backend.calls) == 40 - present
    assert serving(conn) == (target, "hash-a", 8, "ready")
    assert conn.execute(f'SELECT count(*) FROM ragstore."{target}"').fetchone() == (40,)
