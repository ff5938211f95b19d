"""Every file of a folder is accounted for: read, or listed with its reason (grouped by extension in text,
each one in --json and --verbose); a folder of which nothing is read is refused; folder chunks carry
path, title, extension, format, reader and heading to filter on; a document chunk's citation names its path once."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ragstore import Store, families
from ragstore.cli.main import cli
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import InvalidInput
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources, skipped_files
from tests.ids import doc


@pytest.fixture
def family(conn: Any) -> Any:
    return families.create_family(conn, "docs", OfflineBackend())


def mixed_folder(tmp_path: Path) -> Path:
    """3 HTML, 2 RST, 2 gzip, 1 PNG, README/AUTHORS (text, no extension), one binary without an extension,
    one hidden file, a .git folder, and one Markdown document."""
    docs = tmp_path / "docs"
    (docs / "api").mkdir(parents=True)
    (docs / ".git").mkdir()
    (docs / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    for name in ("index.html", "api/fs.html", "api/os.html"):
        (docs / name).write_text("<html><body>html page</body></html>")
    (docs / "guide.rst").write_text("=====\nGuide\n=====\n\nThe reST guide to pears.\n")
    (docs / "api" / "notes.rst").write_text("Notes\n-----\n\nnotes about plums\n")
    (docs / "NEWS.gz").write_bytes(gzip.compress(b"news"))
    (docs / "api" / "old.txt.gz").write_bytes(gzip.compress(b"old"))
    (docs / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (docs / "README").write_text("The project's readme about cherries\n")
    (docs / "AUTHORS").write_text("Ada\nGrace\n")
    (docs / "blob").write_bytes(b"\x00\x01\x02binary")
    (docs / ".gitignore").write_text("*.pyc\n")
    (docs / "intro.md").write_text("Some preface\n\n# The Introduction\n\ntext about figs")
    return docs


def test_a_folder_run_lists_every_file_it_did_not_read_grouped_in_text_and_each_in_json(
    dsn: str, family: Any, tmp_path: Path
) -> None:
    docs = mixed_folder(tmp_path)
    runner = CliRunner()
    text = runner.invoke(cli, ["--dsn", dsn, "index", "docs", str(docs)])
    assert text.exit_code == 0, text.output
    lines = text.output.strip().splitlines()
    # guide.rst, notes.rst, README, AUTHORS, intro.md (2 sections), 3 HTML pages, NEWS.gz, old.txt.gz
    assert lines[0].startswith("docs: 11 inserted"), lines
    assert lines[1:] == [
        "3 files not read: 1 (no extension), 1 .png, 1 hidden; "
        "1 folder not walked (hidden, version control or cache) (--verbose lists each)"
    ]
    verbose = runner.invoke(cli, ["--dsn", dsn, "index", "docs", str(docs), "--verbose"])
    assert verbose.exit_code == 0, verbose.output
    listed = [line for line in verbose.output.splitlines() if line.startswith("skipped ")]
    assert len(listed) == 4 and f"skipped {docs / 'logo.png'}: no reader for .png" in listed
    as_json = runner.invoke(cli, ["--dsn", dsn, "index", "docs", str(docs), "--json"])
    assert as_json.exit_code == 0, as_json.output
    report = json.loads(as_json.output)
    assert report["unchanged"] == 11
    reasons = {os.path.relpath(item["path"], docs): item["reason"] for item in report["skipped_files"]}
    assert reasons == {
        ".git": "folder not walked (hidden, version control or cache)",
        ".gitignore": "hidden file",
        "blob": "not text (no extension, NUL bytes): no reader for it",
        "logo.png": "no reader for .png",
    }


def test_a_non_empty_folder_of_which_nothing_is_read_is_refused_and_writes_nothing(
    dsn: str, conn: Any, family: Any, tmp_path: Path
) -> None:
    pages = tmp_path / "pages"
    pages.mkdir()
    for i in range(4):
        (pages / f"p{i}.png").write_bytes(b"\x89PNG")
    (pages / "style.css").write_text("p {}")
    refused = CliRunner().invoke(cli, ["--dsn", dsn, "index", "docs", str(pages), "--prune"])
    assert refused.exit_code == 1, refused.output
    assert refused.output.strip().splitlines() == [
        f"error: {pages}: no document read (5 files not read: 4 .png, 1 .css); the readers are "
        "docx, html, man, markdown, pdf, rst, text (docs/guide/documents.md)"
    ]
    assert conn.execute("SELECT count(*) FROM ragstore.chunks").fetchone()[0] == 0
    # an empty folder is no error: there was nothing to read
    (tmp_path / "empty").mkdir()
    assert CliRunner().invoke(cli, ["--dsn", dsn, "index", "docs", str(tmp_path / "empty")]).exit_code == 0


def test_a_folder_with_only_empty_documents_was_read(dsn: str, family: Any, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "empty.md").write_text("")
    (docs / "page.png").write_bytes(b"\x89PNG")
    with Store(dsn, pool_size=1) as store:
        report = store.index_files([docs], "docs")
    assert (report.inserted, report.skipped) == (0, 1)


def test_folder_chunks_carry_path_title_extension_format_reader_and_heading(
    dsn: str, conn: Any, family: Any, tmp_path: Path
) -> None:
    docs = mixed_folder(tmp_path)
    sources = open_sources([str(docs)])
    index_sources(conn, "docs", sources)
    assert len(skipped_files(sources)) == 4
    rows = conn.execute("SELECT chunk_id, metadata FROM ragstore.chunks ORDER BY chunk_id").fetchall()
    # intro.md's two chunks told apart by their heading
    metadata = {
        doc(chunk_id) + ("" if "intro" not in chunk_id else meta.get("heading", "")): meta for chunk_id, meta in rows
    }
    assert metadata["docs/intro.md#"] == {
        "path": "docs/intro.md",
        "title": "The Introduction",
        "extension": ".md",
        "format": "markdown",
        "reader": "markdown",
    }
    # the section under the heading is a chunk of its own, with its heading path
    assert metadata["docs/intro.md#The Introduction"]["heading"] == "The Introduction"
    assert metadata["docs/index.html#"]["reader"] == "html"
    assert metadata["docs/api/old.txt.gz#"]["extension"] == ".txt.gz"
    assert metadata["docs/guide.rst#"]["title"] == "Guide"  # the overline is not the title
    assert metadata["docs/guide.rst#"]["format"] == "rst"
    assert metadata["docs/README#"] == {
        "path": "docs/README",
        "title": "The project's readme about cherries",
        "extension": "",
        "format": "text",
        "reader": "text",
    }
    # filterable as any metadata, through the CLI's --where
    found = CliRunner().invoke(
        cli, ["--dsn", dsn, "search", "docs", "notes", "--mode", "exact", "--where", '{"format": "rst"}', "--json"]
    )
    assert found.exit_code == 0, found.output
    hits = json.loads(found.output)["hits"]
    assert sorted(doc(hit["chunk_id"]) for hit in hits) == ["docs/api/notes.rst#", "docs/guide.rst#"]


def test_a_document_chunk_is_cited_by_its_path_once(dsn: str, family: Any, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "fs.md").write_text("# fs\n\nThe file system module")
    with Store(dsn, pool_size=1) as store:
        store.index_files([docs], "docs")
        hits = store.search("docs", "file system", mode="exact", k=1)
    assert hits[0].citation == f"[{hits[0].chunk_id}]" and doc(hits[0].chunk_id) == "docs/fs.md#"
    table = CliRunner().invoke(cli, ["--dsn", dsn, "search", "docs", "file system", "--mode", "exact"])
    assert f"[{hits[0].chunk_id}]" in table.output and "fs.md#docs" not in table.output


def test_an_extensionless_file_named_on_its_own_is_one_document_and_a_binary_one_is_refused(
    conn: Any, family: Any, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "TODO").write_text("write the docs")
    (docs / "core").write_bytes(b"\x7fELF\x00\x00")
    assert index_sources(conn, "docs", open_sources([str(docs / "TODO")])).inserted == 1
    with pytest.raises(InvalidInput, match="NUL bytes"):
        index_sources(conn, "docs", open_sources([str(docs / "core")]))
