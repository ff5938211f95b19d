"""Each reader turns a small file made here into sections with headings (and pages), a title and
metadata; bad files are Unreadable with one reason; the registry picks readers by extension, takes
readers from the ragstore.readers entry points, and names the extra a missing library needs."""

from __future__ import annotations

import gzip
import io
import sys
from pathlib import Path

import pytest

from ragstore.ingest.document import Document, NotThisKind, Section, Unreadable
from ragstore.ingest.formats import Readers, gunzip
from ragstore.ingest.formats import html as html_reader
from ragstore.ingest.formats import man as man_reader
from ragstore.ingest.formats import markdown as markdown_reader
from tests.toolkit.document_readers import _pdf


def test_pdf_pages_are_sections_with_their_page_numbers() -> None:
    from ragstore.ingest.formats import pdf

    document = pdf.read(_pdf(["Pears grow on trees", "Plums are stone fruit"]), "f.pdf")
    assert [(s.page, s.text) for s in document.sections] == [(1, "Pears grow on trees"), (2, "Plums are stone fruit")]
    assert document.title == "Pears grow on trees"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (lambda: _pdf(["", ""]), "no text layer on any of its 2 pages"),
        (lambda: _pdf(["secret"], password="pw"), "encrypted PDF"),
        (lambda: b"%PDF-1.4\n1 0 obj <<", "not a readable PDF"),
    ],
)
def test_a_scanned_encrypted_or_corrupt_pdf_is_unreadable_with_one_reason(data, reason) -> None:  # type: ignore[no-untyped-def]
    from ragstore.ingest.formats import pdf

    with pytest.raises(Unreadable) as caught:
        pdf.read(data(), "f.pdf")
    assert caught.value.reason.startswith(reason) and "\n" not in caught.value.reason


def test_docx_headings_from_styles_make_the_heading_path_and_lists_stay_one_block() -> None:
    import docx

    from ragstore.ingest.formats import docx as docx_reader

    made = docx.Document()
    made.add_heading("Fruit handbook", 0)
    made.add_heading("Install", 1)
    made.add_paragraph("Plant the tree.")
    made.add_heading("From source", 2)
    made.add_paragraph("seeds", style="List Bullet")
    made.add_paragraph("water", style="List Bullet")
    out = io.BytesIO()
    made.save(out)
    document = docx_reader.read(out.getvalue(), "f.docx")
    assert document.title == "Fruit handbook"
    assert document.sections[-1] == Section.of(["From source", "- seeds\n- water"], ("Install", "From source"))
    with pytest.raises(Unreadable, match="not a readable DOCX"):
        docx_reader.read(b"PK\x03\x04 not a zip", "f.docx")


def test_rst_sections_are_structure_and_include_and_raw_directives_read_nothing(tmp_path: Path) -> None:
    from ragstore.ingest.formats import rst

    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET VALUE")
    source = (
        f"Guide\n=====\n\nAbout pears.\n\n.. include:: {secret}\n\n.. raw:: html\n\n   <b>RAWHTML</b>\n\n"
        "Install\n-------\n\n* one\n* two\n"
    )
    document = rst.read(source.encode(), "g.rst")
    assert document.title == "Guide"
    assert [s.heading for s in document.sections] == [("Guide",), ("Guide", "Install")]
    assert document.sections[1].blocks == ("Install", "- one\n- two")
    assert "TOP SECRET" not in document.text and "RAWHTML" not in document.text


def test_html_drops_script_style_nav_and_keeps_headings_as_structure() -> None:
    page = (
        b"<html><head><title>Fruit</title><style>p{}</style></head><body><nav>menu</nav>"
        b"<script>var x</script><h1>Install</h1><p>Run\n it</p><h2>From source</h2><pre>a\n\nb</pre></body></html>"
    )
    document = html_reader.read(page, "f.html")
    assert document.title == "Fruit"
    assert document.sections == (
        Section.of(["Install", "Run it"], ("Install",)),
        Section.of(["From source", "a\n\nb"], ("Install", "From source")),
    )


def test_man_page_sections_title_and_font_escapes() -> None:
    page = (
        b'.\\" comment\n.TH CP 1 "2024" "coreutils"\n.SH NAME\ncp \\- copy files\n.SH DESCRIPTION\n'
        b".B cp\ncopies \\fBSOURCE\\fR to \\fIDEST\\fP.\n.SS Options\n.TP\n\\-a\narchive\n"
    )
    document = man_reader.read(page, "cp.1")
    assert document.title == "CP(1)"
    assert [s.heading for s in document.sections] == [("NAME",), ("DESCRIPTION",), ("DESCRIPTION", "Options")]
    assert document.sections[1].blocks == ("DESCRIPTION", "cp copies SOURCE to DEST.")
    with pytest.raises(NotThisKind):
        man_reader.read(b"\x7fELF\x00\x01", "libc.so.6")


def test_a_man_page_with_asciidoctors_preamble_keeps_its_text() -> None:
    """Asciidoctor (util-linux's pages) ends an ``.am`` inside an ``.if`` block with ``.  .``: a reader that
    waited for ``..`` read such a page as empty. A definition with an end name of its own ends there."""
    page = (
        b'.TH "CHOOM" "1" "2022-05-11"\n.de URL\n\\fI\\\\$2\\fP <\\\\$1>\\\\$3\n..\n.als MTO URL\n'
        b".if \\n[.g] \\{\\\n.  mso www.tmac\n.  am URL\n.    ad l\n.  .\n.  am MTO\n.    ad l\n.  .\n.\\}\n"
        b'.SH "NAME"\nchoom \\- display and adjust OOM\\-killer score.\n'
        b".de XX yy\nnot text\n..\nstill not text\n.yy\n.SH DESCRIPTION\nThe \\fBchoom\\fP command adjusts it.\n"
    )
    document = man_reader.read(page, "choom.1")
    assert [s.heading for s in document.sections] == [("NAME",), ("DESCRIPTION",)]
    assert document.sections[0].blocks == ("NAME", "choom - display and adjust OOM-killer score.")
    assert document.sections[1].blocks == ("DESCRIPTION", "The choom command adjusts it.")


def test_markdown_front_matter_is_metadata_and_title_and_fences_are_not_headings() -> None:
    text = b"---\ntitle: Pears\ntags: [fruit, tree]\ndate: 2024-05-01\n---\n# Install\n\n```\n# not a heading\n```\n"
    document = markdown_reader.read(text, "p.md")
    assert document.title == "Pears"
    assert document.metadata == {"title": "Pears", "tags": ["fruit", "tree"], "date": "2024-05-01"}
    assert [s.heading for s in document.sections] == [("Install",)]
    with pytest.raises(Unreadable) as caught:
        markdown_reader.read(b"---\ntitle: [unclosed\n---\nbody\n", "p.md")
    assert caught.value.line is not None


def test_gunzip_refuses_a_bomb_and_bad_data() -> None:
    assert gunzip(gzip.compress(b"abc") + gzip.compress(b"def")) == b"abcdef"
    with pytest.raises(Unreadable, match="once gunzipped"):
        gunzip(gzip.compress(b"\x00" * 5000), limit=1000)
    with pytest.raises(Unreadable, match="not valid gzip"):
        gunzip(b"not gzip")


@pytest.mark.parametrize(
    ("name", "reader", "gzipped", "suffix"),
    [
        ("cp.1.gz", "man", True, ".1.gz"),
        ("openssl.1ssl", "man", False, ".1ssl"),
        ("README", "text", False, ""),
        ("changelog.gz", "text", True, ".gz"),
        ("Guide.PDF", "pdf", False, ".pdf"),
        ("page.htm", "html", False, ".htm"),
        ("logo.png", None, False, ".png"),
    ],
)
def test_the_registry_chooses_by_extension(name: str, reader: str | None, gzipped: bool, suffix: str) -> None:
    choice = Readers(plugins=False).choose(name)
    assert (choice.reader.name if choice.reader else None, choice.gzipped, choice.suffix) == (reader, gzipped, suffix)


def test_a_missing_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pypdf" else real(name, *a))
    choice = Readers(plugins=False).choose("a.pdf")
    assert choice.missing == "install ragstore[pdf]"


def test_a_reader_of_an_installed_entry_point_is_chosen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real distribution on sys.path (dist-info with entry_points.txt), found by importlib.metadata."""
    (tmp_path / "fruitreader.py").write_text(
        "from ragstore.ingest.document import Document, Section\n"
        "class FruitReader:\n"
        "    name = 'fruit'\n"
        "    suffixes = ('.fruit',)\n"
        "    def read(self, data, path):\n"
        "        return Document((Section(data.decode().upper()),), 'Fruit')\n"
    )
    info = tmp_path / "fruitreader-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fruitreader\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[ragstore.readers]\nfruit = fruitreader:FruitReader\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    choice = Readers().choose("basket.fruit")
    assert choice.reader is not None and choice.reader.name == "fruit"
    assert choice.reader.read(b"pear", "basket.fruit").text == "PEAR"
    assert "fruitreader" in sys.modules


def test_register_refuses_what_is_not_a_reader() -> None:
    from ragstore.errors import InvalidInput

    class Half:
        name = "half"

    with pytest.raises(InvalidInput, match="not a reader"):
        Readers(plugins=False).register(Half())  # type: ignore[arg-type]

    class Bad:
        name = "bad"
        suffixes = ("html",)

        def read(self, data: bytes, path: str) -> Document:
            return Document(())

    with pytest.raises(InvalidInput, match="lower-case extensions"):
        Readers(plugins=False).register(Bad())


@pytest.mark.minilm
def test_a_minilm_window_keeps_every_chunk_within_the_models_word_pieces() -> None:
    from ragstore.embed.minilm import MAX_TOKENS, MiniLMBackend
    from ragstore.ingest.chunker import chunk_document, window_for

    backend = MiniLMBackend()
    window = window_for(backend)
    assert (window.unit, window.limit) == ("tokens", MAX_TOKENS - 2)
    # 1,200 characters of long words are far more than 254 word pieces: a character window would let the
    # model cut them; a word over the window, a list and a fenced block are there too
    words = " ".join(f"Antidisestablishmentarianism{i} electroencephalography." for i in range(60))
    text = f"# Install\n\n{words}\n\n- one\n- two\n\n```\ncode\n\nmore\n```\n\n{'x' * 3000}"
    document = markdown_reader.read(text.encode(), "i.md")
    chunks = chunk_document(document, window, prefix=True)
    counts = backend.count_tokens([c.text for c in chunks])
    assert len(chunks) > 3 and max(counts) <= MAX_TOKENS - 2
    assert any("- one\n- two" in c.text for c in chunks) and any("code\n\nmore" in c.text for c in chunks)
    assert all(c.text.startswith("Install\n\n") for c in chunks)  # the heading prefix
