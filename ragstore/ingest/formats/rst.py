"""reStructuredText with docutils (``ragstore[rst]``): sections as structure, nothing run or included.

The input is untrusted: ``file_insertion_enabled`` and ``raw_enabled`` are off (no ``.. include::``,
``.. raw::`` or ``:file:`` option reads a file of this machine or passes markup through), docutils prints
no report (``report_level`` 5) and stops at nothing short of a severe error, which makes the file
Unreadable. Section titles make the heading path; the title is the first section's. Literal blocks and
lists are one paragraph each.
"""

from __future__ import annotations

import io
from typing import Any

from ragstore.ingest.document import Document, Section, Unreadable
from ragstore.ingest.formats.text import TITLE_CHARS, decode, first_line_title

SETTINGS = {
    "file_insertion_enabled": False,
    "raw_enabled": False,
    "report_level": 5,
    "halt_level": 5,
    "warning_stream": False,
    "doctitle_xform": False,
    "sectsubtitle_xform": False,
    "input_encoding": "unicode",
    "_disable_config": True,
    "embed_stylesheet": False,
    "line_length_limit": 100_000,
}


def _walk(node: Any, path: tuple[str, ...], out: list[Section], nodes: Any) -> None:
    blocks: list[str] = []

    def flush() -> None:
        if blocks:
            out.append(Section.of(blocks, path))
            blocks.clear()

    for child in node.children:
        if isinstance(child, nodes.section):
            flush()
            title = child.next_node(nodes.title)
            name = title.astext().strip() if title is not None else ""
            _walk(child, (*path, name[:TITLE_CHARS]), out, nodes)
        elif isinstance(child, nodes.title):
            blocks.append(child.astext().strip())
        elif isinstance(child, (nodes.comment, nodes.substitution_definition, nodes.target, nodes.system_message)):
            continue
        elif isinstance(child, (nodes.bullet_list, nodes.enumerated_list)):
            items = [" ".join(item.astext().split()) for item in child.children]
            blocks.append("\n".join(f"- {item}" for item in items if item))
        else:
            text = child.astext().strip()
            if text:
                blocks.append(text)
    flush()


def read(data: bytes, path: str) -> Document:
    from docutils import nodes
    from docutils.core import publish_doctree
    from docutils.utils import SystemMessage

    text = decode(data)
    try:
        tree = publish_doctree(text, source_path=path, settings_overrides=SETTINGS | {"warning_stream": io.StringIO()})
    except (SystemMessage, ValueError, RecursionError) as exc:
        raise Unreadable(f"reStructuredText: {exc}") from exc
    sections: list[Section] = []
    _walk(tree, (), sections, nodes)
    title = next((s.heading[0] for s in sections if s.heading), "") or first_line_title(text)
    return Document(tuple(sections), title)
