"""A folder mixing every format: each text document read by its reader (recorded per chunk), the image
listed as not read, a phrase of the PDF and one of a gzipped man page found by `ragstore search`, a bad PDF
named on one line and left out with --skip-bad-files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ragstore import families
from ragstore.cli.main import cli
from ragstore.embed.offline import OfflineBackend
from tests.toolkit.document_readers import _pdf, mixed_folder


@pytest.fixture
def family(conn: Any) -> Any:
    return families.create_family(conn, "docs", OfflineBackend())


def test_a_mixed_folder_is_read_by_its_readers_and_searchable(dsn: str, conn: Any, family: Any, tmp_path: Path) -> None:
    docs = mixed_folder(tmp_path / "docs")
    runner = CliRunner()
    done = runner.invoke(cli, ["--dsn", dsn, "index", "docs", str(docs), "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["skipped_files"] == [{"path": str(docs / "logo.png"), "reason": "no reader for .png"}]
    rows = conn.execute("SELECT package_path, metadata FROM ragstore.chunks").fetchall()
    readers = {package.split("/", 1)[1]: meta["reader"] for package, meta in rows}
    assert readers == {
        "guide.pdf": "pdf",
        "page.html": "html",
        "notes.docx": "docx",
        "api.rst": "rst",
        "prune.1.gz": "man",
        "intro.md": "markdown",
        "README": "text",
    }
    meta = {package.split("/", 1)[1]: m for package, m in rows}
    assert meta["guide.pdf"]["page"] == 1 and meta["intro.md"]["author"] == "Ada"
    assert meta["notes.docx"]["heading"] == "Orchard" and meta["prune.1.gz"]["title"] == "PRUNE(1)"
    for phrase, package in (("quinces ripen", "docs/guide.pdf"), ("cut back branches", "docs/prune.1.gz")):
        found = runner.invoke(cli, ["--dsn", dsn, "search", "docs", phrase, "--mode", "fts", "--json"])
        assert found.exit_code == 0, found.output
        assert json.loads(found.output)["hits"][0]["package_path"] == package


def test_a_scanned_pdf_stops_the_run_with_one_line_unless_skipped(dsn: str, family: Any, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "scan.pdf").write_bytes(_pdf([""]))
    (docs / "ok.txt").write_text("plain words")
    runner = CliRunner()
    refused = runner.invoke(cli, ["--dsn", dsn, "index", "docs", str(docs)])
    assert refused.exit_code == 1
    assert refused.output.strip().splitlines() == [
        f"error: {docs / 'scan.pdf'}: no text layer on any of its 1 pages (a scanned PDF? OCR it first) "
        "(--skip-bad-files indexes the other files)"
    ]
    skipped = runner.invoke(cli, ["--dsn", dsn, "index", "docs", str(docs), "--skip-bad-files"])
    assert skipped.exit_code == 0, skipped.output
    assert skipped.output.startswith("docs: 1 inserted")
    assert f"skipped {docs / 'scan.pdf'}: no text layer" in skipped.output
