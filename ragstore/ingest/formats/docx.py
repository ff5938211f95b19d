"""Word documents (``.docx``) with python-docx (``ragstore[docx]``): sections at the heading styles.

Paragraphs styled ``Heading 1``...``Heading 9`` open sections (their level sets the heading path);
``Title`` is the title, else the core properties' title, else the first heading. Consecutive list
paragraphs (``List ...`` styles) are one block, each item on its line; a table is one block, a row per
line with its cells separated by `` | ``. A file python-docx cannot open (not a ZIP, no document part)
is Unreadable.
"""

from __future__ import annotations

import io
import re
from typing import Any

from ragstore.ingest.document import Document, Section, Unreadable
from ragstore.ingest.formats.text import TITLE_CHARS

_HEADING = re.compile(r"heading\s*([1-9])$", re.IGNORECASE)


def _style(paragraph: Any) -> str:
    try:
        return str(paragraph.style.name or "") if paragraph.style is not None else ""
    except (KeyError, AttributeError):
        return ""


def read(data: bytes, path: str) -> Document:
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(io.BytesIO(data))
        items = list(document.iter_inner_content())
        core_title = str(document.core_properties.title or "").strip()
    except Exception as exc:  # python-docx raises zipfile, KeyError, lxml errors... on a damaged file
        raise Unreadable(f"not a readable DOCX ({type(exc).__name__}: {exc})") from exc
    sections: list[Section] = []
    path_: list[tuple[int, str]] = []
    blocks: list[str] = []
    listing: list[str] = []
    title = ""

    def end_list() -> None:
        if listing:
            blocks.append("\n".join(listing))
            listing.clear()

    def end_section() -> None:
        end_list()
        if blocks:
            sections.append(Section.of(blocks, tuple(name for _, name in path_)))
            blocks.clear()

    for item in items:
        if isinstance(item, Table):
            end_list()
            rows = [" | ".join(cell.text.strip() for cell in row.cells) for row in item.rows]
            blocks.append("\n".join(row for row in rows if row.strip(" |")))
            continue
        if not isinstance(item, Paragraph):
            continue
        text = item.text.strip()
        if not text:
            continue
        style = _style(item)
        heading = _HEADING.search(style)
        if style.lower() == "title" and not title:
            title = text
            blocks.append(text)
        elif heading:
            level = int(heading.group(1))
            end_section()
            while path_ and path_[-1][0] >= level:
                path_.pop()
            path_.append((level, text[:TITLE_CHARS]))
            blocks.append(text)
        elif style.lower().startswith("list"):
            listing.append(f"- {text}")
        else:
            end_list()
            blocks.append(text)
    end_section()
    title = title or core_title or next((s.heading[0] for s in sections if s.heading), "")
    return Document(tuple(sections), title[:TITLE_CHARS])
