"""Folder documents' chunk ids are anchored in their content: editing a paragraph in the middle of a
40-chunk document, or inserting one at its top, rewrites at most 2 chunks (counted by the run's report,
and in the table), and removes the chunks the document no longer holds without --prune; a removed
document still needs --prune; a family written under positional ids (``<package>#<n>``) moves to the new
ids without one embedding call."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest

from ragstore import families
from ragstore.ingest.readers import open_sources
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.run import index_records, index_sources
from tests.toolkit.family_migrate import HashBackend

WORDS = "river stone lamp orchard violin copper meadow harbour lantern pebble quartz willow saddle ember".split()


def paragraphs(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [f"Paragraph {i}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 70))) + "." for i in range(n)]


def write(folder: Path, paras: list[str]) -> None:
    (folder / "guide.md").write_text("# Guide\n\n" + "\n\n".join(paras) + "\n", encoding="utf-8")


def run(conn: Any, folder: Path, backend: Any, **kw: Any) -> Any:
    return index_sources(conn, "docs", open_sources([str(folder)]), backend=backend, **kw)


def stored(conn: Any) -> dict[str, str]:
    rows = conn.execute("SELECT chunk_id, text FROM ragstore.chunks WHERE family = 'docs'").fetchall()
    conn.commit()
    return {str(i): str(t) for i, t in rows}


@pytest.fixture
def backend(conn: Any) -> HashBackend:
    fake = HashBackend()
    families.create_family(conn, "docs", fake)
    return fake


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    return docs


def first_index(conn: Any, folder: Path, backend: HashBackend, paras: list[str]) -> dict[str, str]:
    write(folder, paras)
    report = run(conn, folder, backend)
    before = stored(conn)
    assert 38 <= report.inserted == len(before) <= 60, report  # a document of about 40 chunks
    assert all(re.fullmatch(r"docs/guide\.md#[0-9a-f]{16}(-[0-9]+)?", chunk_id) for chunk_id in before), before
    return before


def test_editing_a_middle_paragraph_rewrites_at_most_two_chunks(conn: Any, backend: HashBackend, folder: Path) -> None:
    paras = paragraphs(96)
    before = first_index(conn, folder, backend, paras)
    paras[48] = paras[48].replace("Paragraph 48:", "Paragraph 48, now edited:")
    write(folder, paras)
    again = HashBackend()
    report = run(conn, folder, again)
    after = stored(conn)
    written = set(after) - set(before)
    assert 1 <= report.inserted + report.updated <= 2 and len(written) == report.inserted + report.updated, report
    assert report.pruned == len(set(before) - set(after)) <= 2  # no --prune: the edited chunk's former id goes
    assert len(after) == report.inserted + report.updated + report.unchanged
    assert any("now edited" in after[i] for i in written)
    assert len(again.calls) == report.embedded <= 2


def test_inserting_a_paragraph_at_the_top_rewrites_at_most_two_chunks(
    conn: Any, backend: HashBackend, folder: Path
) -> None:
    paras = paragraphs(96)
    before = first_index(conn, folder, backend, paras)
    report = run_after(conn, folder, ["A new opening paragraph about lanterns and quartz.", *paras])
    after = stored(conn)
    assert 1 <= report.inserted + report.updated <= 2, report
    assert len(set(before) & set(after)) >= len(before) - 2  # every later chunk kept its id
    assert "A new opening paragraph" in "".join(after[i] for i in set(after) - set(before))


def run_after(conn: Any, folder: Path, paras: list[str]) -> Any:
    write(folder, paras)
    return run(conn, folder, HashBackend())


def test_a_rerun_writes_nothing_and_prune_still_removes_deleted_documents(
    conn: Any, backend: HashBackend, folder: Path
) -> None:
    first_index(conn, folder, backend, paragraphs(96))
    (folder / "other.md").write_text("# Other\n\nA short other document.\n")
    assert run(conn, folder, HashBackend()).inserted == 1
    same = run(conn, folder, HashBackend())
    assert (same.inserted, same.updated, same.pruned, same.embedded) == (0, 0, 0, 0)
    (folder / "other.md").unlink()
    kept = run(conn, folder, HashBackend())
    assert kept.pruned == 0 and any(i.startswith("docs/other.md#") for i in stored(conn))  # not read: kept
    pruned = run(conn, folder, HashBackend(), prune=True)
    assert pruned.pruned == 1 and not any(i.startswith("docs/other.md#") for i in stored(conn))


def test_a_family_written_under_positional_ids_moves_without_an_embedding_call(
    conn: Any, backend: HashBackend, folder: Path
) -> None:
    paras = paragraphs(96)
    write(folder, paras)
    # What an earlier ragstore wrote: the same chunks, texts and metadata under <package>#<n>; the cache
    # emptied (a family indexed before the embedding cache existed).
    records = [record for _, record in open_sources([str(folder)])[0].records()]
    old = [
        ChunkRecord(chunk_id=f"docs/guide.md#{n}", package_path=r.package_path, text=r.text, metadata=r.metadata)
        for n, r in enumerate(records)
    ]
    index_records(conn, "docs", old, backend=backend)
    conn.execute("DELETE FROM ragstore.embedding_cache")
    conn.commit()
    assert set(stored(conn)) == {f"docs/guide.md#{n}" for n in range(len(records))}
    vectors = dict(conn.execute("SELECT content_sha256, embedding::text FROM ragstore.emb_docs").fetchall())
    conn.commit()

    moved = HashBackend()
    report = run(conn, folder, moved)
    assert moved.calls == [] and report.embedded == 0
    assert (report.inserted, report.pruned) == (len(records), len(records))
    assert set(stored(conn)) == {r.chunk_id for r in records}
    assert dict(conn.execute("SELECT content_sha256, embedding::text FROM ragstore.emb_docs").fetchall()) == vectors
