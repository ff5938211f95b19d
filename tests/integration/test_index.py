import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from ragstore import families
from ragstore.embed.offline import OfflineBackend, fingerprint
from ragstore.errors import InvalidInput, ModelMismatch
from ragstore.families import tables
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from tests.ids import doc
from tests.toolkit.index import InterruptedOnThirdCall, records


class CountingBackend(OfflineBackend):
    """The offline backend, counting what it is asked to embed."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def embed(self, texts):
        self.calls.extend(texts)
        return super().embed(texts)


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def table_digest(conn) -> str:
    """A content hash of both tables (everything but timestamps), to compare runs byte for byte."""
    rows = conn.execute(
        "SELECT c.chunk_id, c.package_path, c.text, c.metadata::text, e.embedding::text, e.model, e.package_path "
        "FROM ragstore.chunks c LEFT JOIN ragstore.emb_docs e USING (chunk_id) ORDER BY c.chunk_id"
    ).fetchall()
    return hashlib.sha256(repr(rows).encode()).hexdigest()


@pytest.fixture
def family(conn):
    return families.create_family(conn, "docs", OfflineBackend())


def run(conn, paths, backend=None, **kw):
    return index_sources(conn, "docs", open_sources([str(p) for p in paths]), backend=backend, **kw)


def test_first_run_inserts_and_second_run_writes_nothing(conn, family, tmp_path):
    src = write_jsonl(tmp_path / "c.jsonl", records(50))
    first = run(conn, [src])
    assert (first.inserted, first.updated, first.unchanged) == (50, 0, 0)
    digest = table_digest(conn)
    backend = CountingBackend()
    second = run(conn, [src], backend=backend)
    assert (second.inserted, second.updated, second.unchanged) == (0, 0, 50)
    assert backend.calls == [] and table_digest(conn) == digest
    stored = conn.execute("SELECT embedding FROM ragstore.emb_docs WHERE chunk_id = 'c7'").fetchone()[0]
    assert np.array_equal(stored.to_numpy(), fingerprint(["text number 7"])[0])


def test_duplicates_collapse_first_occurrence_wins(conn, family, tmp_path):
    rows = records(3) + [{"chunk_id": "c1", "package_path": "pkg/a", "text": "second version"}]
    report = run(conn, [write_jsonl(tmp_path / "c.jsonl", rows)])
    assert report.duplicates == 1 and report.inserted == 3
    assert conn.execute("SELECT text FROM ragstore.chunks WHERE chunk_id = 'c1'").fetchone() == ("text number 1",)


def test_changed_text_is_updated_and_only_it_is_re_embedded(conn, family, tmp_path):
    src = write_jsonl(tmp_path / "c.jsonl", records(10))
    run(conn, [src])
    rows = records(10)
    rows[4]["text"] = "a brand new text"
    rows[6]["metadata"] = {"lang": "en"}
    backend = CountingBackend()
    report = run(conn, [write_jsonl(src, rows)], backend=backend)
    assert (report.inserted, report.updated, report.unchanged) == (0, 2, 8)
    assert backend.calls == ["a brand new text"]
    got = conn.execute("SELECT e.embedding FROM ragstore.emb_docs e WHERE chunk_id = 'c4'").fetchone()[0]
    assert np.array_equal(got.to_numpy(), fingerprint(["a brand new text"])[0])
    assert conn.execute("SELECT metadata FROM ragstore.chunks WHERE chunk_id = 'c6'").fetchone() == ({"lang": "en"},)


def test_blank_text_is_skipped_and_never_embedded(conn, family, tmp_path):
    rows = records(2) + [
        {"chunk_id": "blank", "package_path": "p", "text": "   \n\t "},
        {"chunk_id": "empty", "package_path": "p", "text": ""},
    ]
    backend = CountingBackend()
    report = run(conn, [write_jsonl(tmp_path / "c.jsonl", rows)], backend=backend)
    assert report.skipped == 2 and report.inserted == 2
    assert all(t.strip() for t in backend.calls)
    assert conn.execute("SELECT count(*) FROM ragstore.chunks WHERE chunk_id IN ('blank', 'empty')").fetchone() == (0,)


def test_prune_removes_chunks_gone_from_the_indexed_packages_only(conn, family, tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", records(5, "pkg/a", "a"))
    b = write_jsonl(tmp_path / "b.jsonl", records(5, "pkg/b", "b"))
    run(conn, [a, b])
    write_jsonl(a, records(3, "pkg/a", "a"))
    without = run(conn, [a])
    assert without.pruned == 0
    assert conn.execute("SELECT count(*) FROM ragstore.emb_docs").fetchone() == (10,)
    pruned = run(conn, [a], prune=True)
    assert pruned.pruned == 2
    ids = {r[0] for r in conn.execute("SELECT chunk_id FROM ragstore.emb_docs").fetchall()}
    assert ids == {"a0", "a1", "a2"} | {f"b{i}" for i in range(5)}


def test_folder_of_documents_is_chunked_with_stable_ids_and_pruned_by_folder(conn, family, tmp_path):
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "intro.md").write_text("# Intro\n\n" + "\n\n".join(f"Paragraph {i}. " * 30 for i in range(6)))
    (docs / "sub" / "notes.txt").write_text("short note")
    (docs / "image.png").write_bytes(b"\x89PNG\x00\x00")
    first = run(conn, [docs])
    ids = sorted(r[0] for r in conn.execute("SELECT chunk_id FROM ragstore.chunks").fetchall())
    assert {"docs/sub/notes.txt#", "docs/intro.md#"} <= set(map(doc, ids)) and first.inserted == len(ids) >= 3
    again = run(conn, [docs])
    assert again.unchanged == len(ids) and again.inserted == 0
    (docs / "sub" / "notes.txt").unlink()
    pruned = run(conn, [docs], prune=True)
    assert pruned.pruned == 1
    assert conn.execute(
        "SELECT count(*) FROM ragstore.chunks WHERE package_path = 'docs/sub/notes.txt'"
    ).fetchone() == (0,)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "c.jsonl:3: not a JSON object"),
        ('{"chunk_id": "x", "package_path": "p"}', "c.jsonl:3: text: Field required"),
        (
            '{"chunk_id": 5, "package_path": "p", "text": "t"}',
            "c.jsonl:3: chunk_id: Input should be a valid string",
        ),
        ('{"chunk_id": "x", "package_path": "p", "text": "t", "extra": 1}', "c.jsonl:3: extra: Extra inputs"),
        ('{"chunk_id": "x", "package_path": "p", "text": "t", "vector": [NaN, 1]}', "c.jsonl:3: vector"),
        ('{"chunk_id": "x", "package_path": "p", "text": "a\\u0000b"}', "NUL"),
        ("[1, 2]", "c.jsonl:3: not a JSON object"),
    ],
)
def test_bad_lines_name_file_line_and_field_and_write_nothing(conn, family, tmp_path, line, message):
    path = tmp_path / "c.jsonl"
    good = "".join(json.dumps(r) + "\n" for r in records(2))
    path.write_text(good + line + "\n")
    with pytest.raises(InvalidInput, match=message.replace("[", r"\[")):
        run(conn, [path])
    assert conn.execute("SELECT count(*) FROM ragstore.chunks").fetchone() == (0,)


def test_invalid_utf8_is_named(conn, family, tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_bytes(b'{"chunk_id": "a", "package_path": "p", "text": "ok"}\n{"chunk_id": "b", "text": "\xff"}\n')
    with pytest.raises(InvalidInput, match=r"c.jsonl:2: invalid UTF-8"):
        run(conn, [path])


def test_supplied_vectors_are_checked_against_the_family(conn, family, tmp_path):
    rows = [{"chunk_id": "v", "package_path": "p", "text": "t", "vector": [0.5] * 8}]
    with pytest.raises(ModelMismatch, match="8 dimensions"):
        run(conn, [write_jsonl(tmp_path / "c.jsonl", rows)])
    rows = [{"chunk_id": "v", "package_path": "p", "text": "t", "vector": [0.5] * 16, "model": "other"}]
    with pytest.raises(ModelMismatch, match="other"):
        run(conn, [write_jsonl(tmp_path / "c.jsonl", rows)])
    rows = [{"chunk_id": "v", "package_path": "p", "text": "t", "vector": [0.25] * 16}]
    report = run(conn, [write_jsonl(tmp_path / "c.jsonl", rows)], backend=CountingBackend())
    assert report.inserted == 1 and report.embedded == 0
    assert conn.execute("SELECT embedding FROM ragstore.emb_docs").fetchone()[0].to_list() == [0.25] * 16


def test_package_move_updates_every_family_copy(conn, family, tmp_path):
    src = write_jsonl(tmp_path / "c.jsonl", records(2, "old/path"))
    run(conn, [src])
    backend = CountingBackend()
    report = run(conn, [write_jsonl(src, records(2, "new/path"))], backend=backend)
    assert report.updated == 2 and backend.calls == []
    assert conn.execute("SELECT DISTINCT package_path FROM ragstore.emb_docs").fetchall() == [("new/path",)]


def test_bulk_load_into_an_empty_family_builds_the_index_at_the_end(conn, family, tmp_path):
    from ragstore.ingest import writer

    src = write_jsonl(tmp_path / "c.jsonl", records(300))
    old = writer.BULK_THRESHOLD
    writer.BULK_THRESHOLD = 100
    try:
        report = run(conn, [src], batch_size=64)
    finally:
        writer.BULK_THRESHOLD = old
    assert report.inserted == 300 and report.batches == 5
    assert families.family_stats(conn, "docs").hnsw_index is not None


def test_interrupted_run_converges_on_rerun(conn, family, tmp_path):
    """Batches before a failure stay committed; a rerun ends exactly where a clean run does."""
    src = write_jsonl(tmp_path / "c.jsonl", records(100))
    with pytest.raises(KeyboardInterrupt):
        run(conn, [src], backend=InterruptedOnThirdCall(), batch_size=20, connections=1)
    conn.rollback()
    assert conn.execute("SELECT count(*) FROM ragstore.emb_docs").fetchone() == (40,)
    run(conn, [src], batch_size=20)
    interrupted = table_digest(conn)
    conn.execute("TRUNCATE ragstore.chunks CASCADE")
    conn.commit()
    run(conn, [src])
    assert table_digest(conn) == interrupted


def test_a_run_after_a_killed_bulk_load_rebuilds_the_missing_index(conn, family, tmp_path):
    """kill -9 between the bulk drop and the rebuild leaves no index; the next run (family not empty) builds it."""
    src = write_jsonl(tmp_path / "c.jsonl", records(30))
    run(conn, [src])
    tables.drop_hnsw_index(conn, family)  # what a bulk load killed mid-way leaves behind
    assert families.family_stats(conn, "docs").hnsw_index is None
    report = run(conn, [src])
    assert report.unchanged == 30
    assert families.family_stats(conn, "docs").hnsw_index == "ragstore.emb_docs_embedding_hnsw"


def test_a_bad_vector_far_down_the_input_writes_nothing(conn, family, tmp_path):
    """Family-dependent checks (dimension, model) run in the validation pass too, before any batch commits."""
    rows = [{"chunk_id": f"v{i}", "package_path": "p", "text": f"t{i}", "vector": [0.5] * 16} for i in range(50)]
    rows.append({"chunk_id": "bad", "package_path": "p", "text": "t", "vector": [0.5] * 15})
    with pytest.raises(ModelMismatch, match=r"c.jsonl:51: vector: 15 dimensions"):
        run(conn, [write_jsonl(tmp_path / "c.jsonl", rows)], batch_size=10)
    conn.rollback()
    assert conn.execute("SELECT count(*) FROM ragstore.chunks").fetchone() == (0,)
