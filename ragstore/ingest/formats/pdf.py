"""PDF with pypdf (``ragstore[pdf]``): one section per page, with its page number; the outline's headings.

A PDF is Unreadable when pypdf cannot parse it (corrupt, truncated), when it is encrypted with a password
(an empty user password is tried, as viewers do), and when no page has a text layer (a scan: OCR it
first). The title is the document information's, else the outline's first entry, else the first line.
Each page's heading path is the outline entry (bookmark) it falls under, when the PDF has an outline.
"""

from __future__ import annotations

import io
import logging
from typing import Any

from ragstore.ingest.document import Document, Section, Unreadable
from ragstore.ingest.formats.text import TITLE_CHARS, first_line_title

MAX_PAGES = 10_000


def _outline(reader: Any) -> dict[int, tuple[str, ...]]:
    """Page index -> the heading path of the last outline entry that starts on or before it."""
    starts: list[tuple[int, tuple[str, ...]]] = []

    def walk(items: Any, path: tuple[str, ...]) -> None:
        last: tuple[str, ...] = path
        for item in items:
            if isinstance(item, list):
                walk(item, last)
                continue
            title = str(getattr(item, "title", "") or "").strip()
            try:
                page = reader.get_destination_page_number(item)
            except Exception:
                continue
            last = (*path, title[:TITLE_CHARS])
            if page is not None and page >= 0:
                starts.append((page, last))

    try:
        walk(reader.outline, ())
    except Exception:
        return {}
    starts.sort(key=lambda item: item[0])
    out: dict[int, tuple[str, ...]] = {}
    current: tuple[str, ...] = ()
    position = 0
    for page in range(len(reader.pages)):
        while position < len(starts) and starts[position][0] <= page:
            current = starts[position][1]
            position += 1
        out[page] = current
    return out


def read(data: bytes, path: str) -> Document:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # its warnings about odd but readable files
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")
            except (FileNotDecryptedError, NotImplementedError, DependencyError) as exc:
                raise Unreadable(f"encrypted PDF: {exc}") from exc
            if not opened:
                raise Unreadable("encrypted PDF (it needs a password)")
        if len(reader.pages) > MAX_PAGES:
            raise Unreadable(f"more than {MAX_PAGES} pages")
        headings = _outline(reader)
        sections = []
        for number, page in enumerate(reader.pages):
            text = (page.extract_text() or "").replace("\r\n", "\n").replace("\x00", "")
            if text.strip():
                sections.append(Section(text.strip(), headings.get(number, ()), number + 1))
        info = reader.metadata
        title = str(info.title or "").strip() if info is not None else ""
    except Unreadable:
        raise
    except FileNotDecryptedError as exc:
        raise Unreadable(f"encrypted PDF: {exc}") from exc
    except (PdfReadError, Exception) as exc:  # pypdf raises many kinds on a damaged file: all mean unreadable
        raise Unreadable(f"not a readable PDF ({type(exc).__name__}: {exc})") from exc
    if not sections:
        raise Unreadable(f"no text layer on any of its {len(reader.pages)} pages (a scanned PDF? OCR it first)")
    if not title:
        title = next((s.heading[0] for s in sections if s.heading), "") or first_line_title(sections[0].text)
    return Document(tuple(sections), title[:TITLE_CHARS])
