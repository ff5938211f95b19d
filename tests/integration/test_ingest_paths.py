"""The write paths of the one pass: the bulk load's straight COPY, records handed over by a program, and
the VACUUM after a run that rewrote a large share of a family."""

import json
import threading

import numpy as np
import pytest

from ragstore import families
from ragstore.embed.external import ExternalBackend
from ragstore.errors import InvalidInput, ModelMismatch
from ragstore.ingest import writer
from ragstore.ingest.fast import OnePass
from ragstore.ingest.readers import open_sources
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.run import index_records, index_sources
from tests.reliability.helpers import distinct_words
from tests.toolkit.ingest_paths import DIM, content, rows, vectors, write_jsonl


@pytest.fixture
def two(conn):
    for name in ("a", "b"):
        families.create_family(conn, name, ExternalBackend("mine", DIM), options={"dimensions": DIM})


def test_a_bulk_load_copied_straight_into_the_tables_stores_what_the_merge_stores(conn, two, tmp_path, monkeypatch):
    src = write_jsonl(tmp_path / "v.jsonl", rows(40))
    monkeypatch.setattr(writer, "BULK_THRESHOLD", 10)
    bulk = index_sources(conn, "a", open_sources([str(src)]), batch_size=16)
    monkeypatch.setattr(writer, "BULK_THRESHOLD", 10**9)
    merged = index_sources(conn, "b", open_sources([str(src)]), batch_size=16)
    assert (bulk.inserted, merged.inserted) == (40, 40)
    assert families.family_stats(conn, "a").hnsw_index is not None
    assert content(conn, "a") == content(conn, "b") and len(content(conn, "a")) == 40
    again = index_sources(conn, "a", open_sources([str(src)]))
    assert (again.inserted, again.updated, again.unchanged) == (0, 0, 40)


def test_a_bulk_load_meeting_a_row_already_there_merges_instead(conn, two, tmp_path, monkeypatch):
    # A chunk row of the family without its vector (as a concurrent writer's half-way state would be seen
    # by a straight COPY): the batch holding it is merged, the load completes and converges.
    conn.execute(
        "INSERT INTO ragstore.chunks (family, chunk_id, package_path, text, content_sha256, record_sha256) "
        "VALUES ('a', 'c005', 'pkg/2', 'stale', sha256('stale'), sha256('x'))"
    )
    conn.commit()
    src = write_jsonl(tmp_path / "v.jsonl", rows(40))
    monkeypatch.setattr(writer, "BULK_THRESHOLD", 10)
    report = index_sources(conn, "a", open_sources([str(src)]), batch_size=16)
    assert report.inserted == 40
    monkeypatch.setattr(writer, "BULK_THRESHOLD", 10**9)
    index_sources(conn, "b", open_sources([str(src)]))
    assert content(conn, "a") == content(conn, "b")


def test_records_from_a_program_go_through_the_pass(conn, two):
    records = [ChunkRecord(**r) for r in rows(12)]
    first = index_records(conn, "a", records)
    assert (first.inserted, first.unchanged) == (12, 0)
    # Each record got a source hash: an unchanged re-run finds every one by it.
    stored = conn.execute("SELECT count(*) FROM ragstore.chunks WHERE family = 'a' AND source_sha256 IS NOT NULL")
    assert stored.fetchone()[0] == 12
    again = index_records(conn, "a", records)
    assert (again.inserted, again.updated, again.unchanged) == (0, 0, 12)
    changed = records[:11] + [ChunkRecord(**(rows(12)[11] | {"text": "new"}))]
    assert index_records(conn, "a", changed).updated == 1

    bad = [ChunkRecord(**r) for r in rows(3, seed=2, text="other")] + [
        ChunkRecord(chunk_id="x", package_path="p", text="t", vector=[1.0, 2.0])
    ]
    with pytest.raises(ModelMismatch, match=r"record 4: vector: 2 dimensions"):
        index_records(conn, "b", bad)
    assert conn.execute("SELECT count(*) FROM ragstore.chunks WHERE family = 'b'").fetchone()[0] == 0


def hnsw_identity(conn, family: str):
    row = conn.execute(
        "SELECT c.oid, c.relfilenode FROM pg_class c WHERE c.relname = %s",
        (families.get_family(conn, family).hnsw_index,),
    ).fetchone()
    conn.commit()
    return row


def test_a_run_that_rewrites_a_tenth_of_a_family_rebuilds_its_graph_and_a_small_change_does_not(conn, two, tmp_path):
    records = rows(50)
    src = write_jsonl(tmp_path / "v.jsonl", records)
    index_sources(conn, "a", open_sources([str(src)]))
    built = hnsw_identity(conn, "a")
    few = [r | {"text": "changed"} if i < 2 else r for i, r in enumerate(records)]  # 4%
    report = index_sources(conn, "a", open_sources([str(write_jsonl(tmp_path / "few.jsonl", few))]))
    assert report.updated == 2 and not report.reindexed
    assert hnsw_identity(conn, "a") == built
    many = [r | {"text": "changed again"} if i < 5 else r for i, r in enumerate(records)]  # 10%
    report = index_sources(conn, "a", open_sources([str(write_jsonl(tmp_path / "many.jsonl", many))]))
    assert report.updated == 5 and report.reindexed and report.as_dict()["reindexed"] is True
    assert hnsw_identity(conn, "a") != built
    assert families.family_stats(conn, "a").hnsw_index is not None
    nearest = "SELECT chunk_id FROM ragstore.emb_a ORDER BY embedding <=> %s::vector LIMIT 1"
    found = conn.execute(nearest, (many[3]["vector"],))
    assert found.fetchone()[0] == "c003"


def fail_second_copy(monkeypatch) -> list[int]:
    """The bulk load's second straight COPY raises RuntimeError; returns the sizes of the batches tried."""
    copy_direct = writer.copy_direct
    calls: list[int] = []

    def fail_second(self, batch, vectors):
        calls.append(len(batch.rows))
        if len(calls) == 2:
            raise RuntimeError("stopped")
        return copy_direct(self, batch, vectors)

    monkeypatch.setattr(writer, "copy_direct", fail_second)
    return calls


def test_a_bulk_load_stopped_half_way_leaves_nothing_and_a_rerun_converges(conn, two, tmp_path, monkeypatch):
    # A bulk load of precomputed vectors is streamed during the pass in one transaction: all or nothing.
    src = write_jsonl(tmp_path / "v.jsonl", rows(40))
    monkeypatch.setattr(writer, "BULK_THRESHOLD", 10)
    copy_direct = writer.copy_direct
    calls = fail_second_copy(monkeypatch)
    with pytest.raises(RuntimeError, match="stopped"):
        index_sources(conn, "a", open_sources([str(src)]), batch_size=16)
    conn.rollback()
    assert len(calls) == 2
    assert conn.execute("SELECT count(*) FROM ragstore.emb_a").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM ragstore.chunks WHERE family = 'a'").fetchone()[0] == 0
    assert families.family_stats(conn, "a").hnsw_index is not None
    monkeypatch.setattr(writer, "copy_direct", copy_direct)
    report = index_sources(conn, "a", open_sources([str(src)]), batch_size=16)
    assert (report.inserted, report.unchanged) == (40, 0)
    monkeypatch.setattr(writer, "BULK_THRESHOLD", 10**9)
    index_sources(conn, "b", open_sources([str(src)]))
    assert content(conn, "a") == content(conn, "b")


def spy_streamed(monkeypatch) -> tuple[list[int], threading.Event]:
    """Counts the batches the bulk stream's thread COPied; the event is set once two were."""
    calls: list[int] = []
    two_done = threading.Event()
    stream_batch = writer.Writer.stream_batch

    def spy(self, batch):
        stream_batch(self, batch)
        calls.append(len(batch))
        if len(calls) >= 2:
            two_done.set()

    monkeypatch.setattr(writer.Writer, "stream_batch", spy)
    return calls, two_done


def hold_third_batch(monkeypatch, ready: threading.Event) -> None:
    """The pass waits for ``ready`` before its third batch (so the stream has written the first two)."""
    finish = OnePass._finish
    batches = []

    def held(self, parsed):
        batches.append(1)
        if len(batches) == 3:
            assert ready.wait(30)
        return finish(self, parsed)

    monkeypatch.setattr(OnePass, "_finish", held)


def test_a_bad_record_in_the_last_batch_of_a_streamed_bulk_load_leaves_nothing_written(
    conn, two, tmp_path, monkeypatch
):
    records = rows(40)
    records[39]["vector"] = [1.0, 2.0]
    src = write_jsonl(tmp_path / "v.jsonl", records)
    monkeypatch.setattr(writer, "BULK_THRESHOLD", 10)
    calls, two_done = spy_streamed(monkeypatch)
    hold_third_batch(monkeypatch, two_done)
    with pytest.raises(ModelMismatch, match=r"v\.jsonl:40: vector: 2 dimensions"):
        index_sources(conn, "a", open_sources([str(src)]), batch_size=16)
    conn.rollback()
    assert calls == [16, 16]  # streamed, then rolled back
    assert conn.execute("SELECT count(*) FROM ragstore.chunks WHERE family = 'a'").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM ragstore.emb_a").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM ragstore.chunk_terms WHERE family = 'a'").fetchone()[0] == 0
    assert families.family_stats(conn, "a").hnsw_index is not None
    report = index_sources(conn, "a", open_sources([str(write_jsonl(tmp_path / "ok.jsonl", rows(40)))]))
    assert report.inserted == 40


def test_a_streamed_bulk_load_names_a_text_over_the_full_text_limit_before_a_later_bad_line(
    conn, two, tmp_path, monkeypatch
):
    # Once the load streams, the writer thread checks the texts' full-text size: its finding in batch 2
    # is the error, not the pass's later one in batch 3.
    records = rows(40)
    records[19]["text"] = distinct_words(3 * 1024 * 1024)
    lines = [json.dumps(r) for r in records]
    lines[35] = '{"chunk_id": "broken'
    src = tmp_path / "v.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setattr(writer, "BULK_THRESHOLD", 10)
    with pytest.raises(InvalidInput, match=r"v\.jsonl:20: text: .*1 MB"):
        index_sources(conn, "a", open_sources([str(src)]), batch_size=16)
    conn.rollback()
    assert conn.execute("SELECT count(*) FROM ragstore.chunks WHERE family = 'a'").fetchone()[0] == 0
    assert families.family_stats(conn, "a").hnsw_index is not None


def test_a_streamed_bulk_load_stores_the_postings_the_merge_stores(conn, two, tmp_path, monkeypatch):
    src = write_jsonl(tmp_path / "v.jsonl", rows(40))
    monkeypatch.setattr(writer, "BULK_THRESHOLD", 10)
    calls, _ = spy_streamed(monkeypatch)
    index_sources(conn, "a", open_sources([str(src)]), batch_size=16)
    assert sum(calls) == 40
    monkeypatch.setattr(writer, "BULK_THRESHOLD", 10**9)
    index_sources(conn, "b", open_sources([str(src)]), batch_size=16)
    postings = "SELECT chunk_id, lexeme, tf, dl FROM ragstore.chunk_terms WHERE family = %s ORDER BY 1, 2"
    streamed = conn.execute(postings, ("a",)).fetchall()
    assert len(streamed) > 40 and streamed == conn.execute(postings, ("b",)).fetchall()


def test_a_rerun_writes_the_few_changed_records_of_many_pass_batches_in_one_transaction(conn, two, tmp_path):
    records = rows(40)
    index_sources(conn, "a", open_sources([str(write_jsonl(tmp_path / "v.jsonl", records))]), batch_size=10)
    changed = [r | {"text": "changed"} if i % 10 == 3 else r for i, r in enumerate(records)]  # one per batch
    src = write_jsonl(tmp_path / "changed.jsonl", changed)
    report = index_sources(conn, "a", open_sources([str(src)]), batch_size=10)
    assert (report.updated, report.unchanged, report.batches) == (4, 36, 1)
    fresh = index_sources(conn, "b", open_sources([str(src)]), batch_size=10)
    assert fresh.inserted == 40
    assert content(conn, "a") == content(conn, "b")


def test_a_problem_in_an_earlier_parquet_batch_is_named_before_one_read_in_the_next(conn, two, tmp_path):
    # The pass reads and hashes batch k+1 while batch k is looked up: batch k's problem still comes first.
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    records = rows(40)
    index_sources(conn, "a", open_sources([str(write_jsonl(tmp_path / "v.jsonl", records))]))
    matrix = vectors(40)
    matrix[20, 1] = np.nan
    metadata = [json.dumps(r["metadata"]) for r in records]
    metadata[2] = "{not json"
    table = pa.table(
        {
            "chunk_id": [r["chunk_id"] for r in records],
            "package_path": [r["package_path"] for r in records],
            "text": [r["text"] + " new" for r in records],
            "metadata": metadata,
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1)), DIM),
        }
    )
    pq.write_table(table, tmp_path / "v.parquet")
    with pytest.raises(InvalidInput, match=r"v\.parquet: row 3: metadata: not JSON"):
        index_sources(conn, "a", open_sources([str(tmp_path / "v.parquet")]), batch_size=16)
    conn.rollback()
    metadata[2] = json.dumps(records[2]["metadata"])
    pq.write_table(table.set_column(3, "metadata", pa.array(metadata)), tmp_path / "v.parquet")
    with pytest.raises(InvalidInput, match=r"v\.parquet: row 21: vector\[1\] is nan"):
        index_sources(conn, "a", open_sources([str(tmp_path / "v.parquet")]), batch_size=16)
    conn.rollback()
    assert (
        conn.execute("SELECT count(*) FROM ragstore.chunks WHERE family = 'a' AND text LIKE '%% new'").fetchone()[0]
        == 0
    )


def test_a_parquet_first_load_is_not_streamed_and_keeps_whole_batches(conn, two, tmp_path, monkeypatch):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    records = rows(40)
    table = pa.table(
        {
            "chunk_id": [r["chunk_id"] for r in records],
            "package_path": [r["package_path"] for r in records],
            "text": [r["text"] for r in records],
            "metadata": [json.dumps(r["metadata"]) for r in records],
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors(40).reshape(-1)), DIM),
        }
    )
    pq.write_table(table, tmp_path / "v.parquet")
    monkeypatch.setattr(writer, "BULK_THRESHOLD", 10)
    streamed, _ = spy_streamed(monkeypatch)
    copy_direct = writer.copy_direct
    copied = fail_second_copy(monkeypatch)
    with pytest.raises(RuntimeError, match="stopped"):
        index_sources(conn, "a", open_sources([str(tmp_path / "v.parquet")]), batch_size=16)
    conn.rollback()
    # Two writers: the one that did not fail finishes the batch it holds, which may be the last (8 rows),
    # taken before the second batch's COPY failed. Every batch but the failed one is committed whole.
    assert streamed == [] and copied[:2] == [16, 16] and copied[2:] in ([], [8])
    kept = 16 + sum(copied[2:])
    assert conn.execute("SELECT count(*) FROM ragstore.emb_a").fetchone()[0] == kept
    monkeypatch.setattr(writer, "copy_direct", copy_direct)
    report = index_sources(conn, "a", open_sources([str(tmp_path / "v.parquet")]), batch_size=16)
    assert (report.inserted, report.unchanged) == (40 - kept, kept)
