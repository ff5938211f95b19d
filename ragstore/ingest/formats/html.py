"""HTML with the standard library's parser: sections at ``<h1>``...``<h6>``, the text of the page only.

What a reader of the page does not read is dropped: ``<script>``, ``<style>``, ``<nav>``, ``<noscript>``,
``<template>``, ``<svg>``, ``<iframe>``, ``<head>`` (but its ``<title>``, the document's title) and
anything ``hidden``. Block elements end a paragraph, ``<li>``, ``<tr>`` and ``<br>`` a line; ``<pre>``
keeps its lines; elsewhere runs of white space are one space. The bytes are decoded as UTF-8, else in
the ``<meta charset>`` the page declares, else as Windows-1252.
"""

from __future__ import annotations

import codecs
import re
from html.parser import HTMLParser

from ragstore.ingest.document import Document, Section
from ragstore.ingest.formats.text import TITLE_CHARS

_DROP = frozenset({"script", "style", "nav", "noscript", "template", "svg", "iframe", "head", "object", "canvas"})
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"}
)
_BLOCK = frozenset(
    {
        "p", "div", "section", "article", "main", "aside", "header", "footer", "blockquote", "ul", "ol", "dl",
        "table", "form", "fieldset", "figure", "figcaption", "address", "details", "summary", "hr", "pre",
    }
)  # fmt: skip
_LINE = frozenset({"li", "tr", "br", "dt", "dd", "caption", "option"})
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_BREAK = "\u2028"  # a <br> outside <pre>, until the line is cut
_SPACES = re.compile(r"[ \t\r\n\f\v\u00a0]+")


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    declared = _CHARSET.search(data[:4096])
    if declared:
        try:
            return data.decode(codecs.lookup(declared.group(1).decode("ascii")).name, errors="replace")
        except LookupError:
            pass
    return data.decode("cp1252", errors="replace")


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[Section] = []
        self.title = ""
        self._path: list[tuple[int, str]] = []
        self._blocks: list[str] = []  # paragraphs of the current section
        self._para: list[str] = []  # lines of the current paragraph
        self._line: list[str] = []  # pieces of the current line
        self._stack: list[str] = []  # open elements that drop their content
        self._pre = 0
        self._in_title = False
        self._heading: tuple[int, list[str]] | None = None

    # -- text: lines make paragraphs (a list is one paragraph), paragraphs make the section ------------
    def _flush_line(self) -> None:
        text = "".join(self._line)
        self._line.clear()
        if self._pre:
            lines = [text.strip("\n")] if text.strip() else []
        else:
            lines = [_SPACES.sub(" ", piece).strip() for piece in text.split(_BREAK)]
        self._para.extend(line for line in lines if line.strip())

    def _end_paragraph(self) -> None:
        self._flush_line()
        if self._para:
            self._blocks.append("\n".join(self._para))
            self._para.clear()

    def _close_section(self) -> None:
        self._end_paragraph()
        if self._blocks:
            self.sections.append(Section.of(self._blocks, tuple(title for _, title in self._path)))
        self._blocks.clear()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title" and not self.title:
            self._in_title = True
            return
        if self._stack or tag in _DROP or any(name == "hidden" for name, _ in attrs):
            if tag not in _VOID:
                self._stack.append(tag)
            return
        if tag in _HEADINGS:
            self._end_paragraph()
            self._heading = (_HEADINGS[tag], [])
        elif tag == "pre":
            self._end_paragraph()
            self._pre += 1
        elif tag in _BLOCK:
            self._end_paragraph()
        elif tag in _LINE:
            if tag == "br":
                self._line.append("\n" if self._pre else _BREAK)
            else:
                self._flush_line()

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self._in_title:
            self._in_title = False
            return
        if self._stack:
            if tag in self._stack:
                while self._stack and self._stack.pop() != tag:
                    pass
            return
        if tag in _HEADINGS and self._heading is not None:
            level, pieces = self._heading
            self._heading = None
            title = _SPACES.sub(" ", "".join(pieces)).strip()
            if title:
                self._close_section()
                while self._path and self._path[-1][0] >= level:
                    self._path.pop()
                self._path.append((level, title[:TITLE_CHARS]))
                self._blocks.append(title)
        elif tag == "pre":
            self._end_paragraph()
            self._pre = max(0, self._pre - 1)
        elif tag in _BLOCK:
            self._end_paragraph()
        elif tag in _LINE:
            self._flush_line()

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif self._stack:
            return
        elif self._heading is not None:
            self._heading[1].append(data)
        else:
            self._line.append(data)


def read(data: bytes, path: str) -> Document:
    page = _Page()
    page.feed(_decode(data))
    page.close()
    page._close_section()
    title = _SPACES.sub(" ", page.title).strip()
    if not title:
        title = next((s.heading[0] for s in page.sections if s.heading), "")
    return Document(tuple(page.sections), title[:TITLE_CHARS])
