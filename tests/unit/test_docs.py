"""Docs that stand alone: nothing cites documents outside the repository, every citation of a docs/ page,
of benchmarks/README.md or of a README section names a heading that exists (the README's old sections
now live on the docs pages), every page is in the site's navigation, and code that nothing calls is gone."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ("ragstore", "migrations", "tests", "benchmarks", "sql", "scripts", "docs", "examples", "README.md")
SUFFIXES = {".py", ".sql", ".md", ".sh", ".toml", ".txt"}
# Written in pieces so that this file does not cite what it forbids.
OUTSIDE = re.compile(r"\b(?:" + "SP" + r"EC\b|" + "MEAS" + r"URED\.md|[Ii]ssue\s+#?\d)")
DOC_CITATION = re.compile(r'(docs/(?:\w+/)*\w+\.md|benchmarks/README\.md)(?:, | \()"([^"]+)"')
README_CITATION = re.compile(r'README, "([^"]+)"')


def _tracked_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", *CHECKED],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    skipped = ("tests/data/", "tests/unit/test_docs.py")
    return [ROOT / name for name in listed if Path(name).suffix in SUFFIXES and not name.startswith(skipped)]


def _headings(path: Path) -> list[str]:
    return [line.lstrip("#").strip() for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("#")]


def test_nothing_cites_documents_outside_the_repository() -> None:
    found = []
    for path in _tracked_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if OUTSIDE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []


def test_the_docs_exist_and_say_what_they_are_for() -> None:
    assert "Index" in " ".join(_headings(ROOT / "docs" / "architecture.md"))
    assert "Search" in " ".join(_headings(ROOT / "docs" / "architecture.md"))
    assert len(_headings(ROOT / "docs" / "decisions.md")) > 10


def test_every_docs_citation_names_an_existing_heading() -> None:
    cited = 0
    for path in _tracked_files():
        text = path.read_text(encoding="utf-8")
        for doc, title in DOC_CITATION.findall(text):
            # A heading may name its script after the title: "Queries (`benchmarks/query.py`)".
            headings = _headings(ROOT / doc)
            title = re.sub(r"\s*\n\s*(?:--|#)?\s*", " ", title)  # a title wrapped in a comment
            found = any(h == title or h.startswith(f"{title} (") for h in headings)
            assert found, f"{path.relative_to(ROOT)} cites {doc}, {title!r}: no such heading"
            cited += 1
    assert cited >= 10


def test_every_readme_citation_names_an_existing_section() -> None:
    # A frozen migration may still cite a README section that moved to a docs page.
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    headings = [h for page in pages for h in _headings(page)]
    for path in _tracked_files():
        for title in README_CITATION.findall(path.read_text(encoding="utf-8")):
            assert any(h.startswith(title) for h in headings), f"{path.relative_to(ROOT)} cites README, {title!r}"


def test_the_auto_mode_is_described_as_it_is() -> None:
    from ragstore.search import api

    assert api.__doc__ is not None and "for now" not in api.__doc__
    assert "default_mode" in api.__doc__


def test_the_hybrid_sql_header_names_the_placeholders_the_blocks_use() -> None:
    text = (ROOT / "ragstore" / "sql" / "hybrid.sql").read_text(encoding="utf-8")
    header = text.split("-- name:", 1)[0]
    used = set(re.findall(r"\{(\w+)\}", text.split("-- name:", 1)[1]))
    named = set(re.findall(r"\{(\w+)\}", header))
    assert used <= named, f"placeholders used but not described: {sorted(used - named)}"
    assert named <= used, f"placeholders described but not used: {sorted(named - used)}"


def test_every_docs_page_is_in_the_site_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = sorted(str(page.relative_to(ROOT / "docs")) for page in (ROOT / "docs").rglob("*.md"))
    assert len(pages) >= 14
    assert [page for page in pages if f": {page}" not in nav] == []
