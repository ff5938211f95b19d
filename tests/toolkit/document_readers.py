"""Helpers several test modules share (once in unit/test_document_readers.py)."""

from __future__ import annotations

import gzip
import io
from pathlib import Path


def _pdf(pages: list[str], password: str | None = None) -> bytes:
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    for text in pages:
        page = writer.add_blank_page(612, 792)
        font = DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
            }
        )
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(font)})}
        )
        stream = DecodedStreamObject()
        if text:
            stream.set_data(f"BT /F1 12 Tf 72 712 Td ({text}) Tj ET".encode())
        page[NameObject("/Contents")] = writer._add_object(stream)
    if password:
        writer.encrypt(password)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _docx(text: str) -> bytes:
    import docx

    made = docx.Document()
    made.add_heading("Orchard", 1)
    made.add_paragraph(text)
    out = io.BytesIO()
    made.save(out)
    return out.getvalue()


def mixed_folder(docs: Path) -> Path:
    """A folder of every document kind a reader reads (PDF, HTML, DOCX, RST, a gzipped man page, Markdown with
    front matter, an extensionless README), each with its own phrase, and an image no reader reads."""
    docs.mkdir()
    (docs / "guide.pdf").write_bytes(_pdf(["Quinces ripen late in autumn"]))
    (docs / "page.html").write_text("<html><head><title>Figs</title></head><body><h1>Figs</h1><p>figs like sun</p>")
    (docs / "notes.docx").write_bytes(_docx("apricots need shelter"))
    (docs / "api.rst").write_text("API\n===\n\nplums in rows\n")
    (docs / "prune.1.gz").write_bytes(gzip.compress(b".TH PRUNE 1\n.SH NAME\nprune \\- cut back branches\n"))
    (docs / "intro.md").write_text("---\ntitle: Intro\nauthor: Ada\n---\n# Start\n\ncherries\n")
    (docs / "README").write_text("readme about pears\n")
    (docs / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00")
    return docs
