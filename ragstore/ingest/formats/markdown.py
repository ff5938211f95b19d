"""Markdown: sections at ATX (``## Install``) and setext headings, YAML front matter as metadata.

Front matter is a YAML mapping between a first line ``---`` and a line ``---`` (or ``...``), read with
``yaml.safe_load`` (no tags that build objects); its ``title`` is the document's title, every key goes to
the metadata (the walk's own keys, such as ``path``, win). Lines inside fenced code blocks are never
headings.
"""

from __future__ import annotations

import re
from typing import Any

from ragstore.common.jsonvalue import json_metadata
from ragstore.errors import InvalidInput
from ragstore.ingest.document import Document, Section, Unreadable
from ragstore.ingest.formats.text import TITLE_CHARS, decode, first_line_title

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_FRONT_END = ("---", "...")


def front_matter(text: str) -> tuple[dict[str, Any], str, int]:
    """The front matter of ``text`` (``{}`` when it has none), the text after it, and the number of lines
    it took; Unreadable naming the line for YAML that does not parse or is not a mapping."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        return {}, text, 0
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in _FRONT_END), None)
    if end is None:
        return {}, text, 0  # a rule, not front matter
    import yaml

    try:
        value = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1
        raise Unreadable(f"front matter: {getattr(exc, 'problem', None) or exc}", line) from exc
    if value is None:
        value = {}
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        raise Unreadable("front matter: not a mapping of names to values", 2)
    try:
        metadata = json_metadata(value, "front matter")
    except InvalidInput as exc:
        raise Unreadable(str(exc), 2) from exc
    return metadata, "\n".join(lines[end + 1 :]), end + 1


def sections(text: str) -> list[Section]:
    """``text`` cut at its headings; each section starts with its heading line as written."""
    out: list[Section] = []
    path: list[tuple[int, str]] = []
    current: list[str] = []
    fence = ""

    def close() -> None:
        body = "\n".join(current).strip("\n")
        if body.strip():
            out.append(Section(body, tuple(title for _, title in path)))
        current.clear()

    def open_heading(level: int, title: str) -> None:
        close()
        while path and path[-1][0] >= level:
            path.pop()
        path.append((level, title.strip()))

    for line in text.split("\n"):
        if fence:
            if line.strip().startswith(fence):
                fence = ""
            current.append(line)
            continue
        opened = _FENCE.match(line)
        if opened:
            fence = opened.group(1)
            current.append(line)
            continue
        atx = _ATX.match(line)
        if atx:
            open_heading(len(atx.group(1)), atx.group(2))
            current.append(line)
            continue
        setext = _SETEXT.match(line)
        if setext and current and current[-1].strip() and not _ATX.match(current[-1]):
            previous = current.pop()
            if not "\n".join(current).strip() or current[-1].strip() == "":
                open_heading(1 if setext.group(1)[0] == "=" else 2, previous)
                current.extend([previous, line])
                continue
            current.append(previous)
        current.append(line)
    close()
    return out


def read(data: bytes, path: str) -> Document:
    text = decode(data)
    metadata, body, _ = front_matter(text)
    found = sections(body)
    title = metadata.get("title")
    if not isinstance(title, str) or not title.strip():
        headed = next((s.heading[-1] for s in found if s.heading), "")
        title = headed or first_line_title(body)
    return Document(tuple(found), title.strip()[:TITLE_CHARS], metadata)
