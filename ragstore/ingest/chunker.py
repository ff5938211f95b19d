"""Deterministic, paragraph-aware chunking of text documents.

Paragraphs (blank-line separated) are packed greedily into chunks of at most ``max_chars`` characters
(about 1,200 by default); a paragraph that is longer is split on lines, then sentences, then words,
then hard at ``max_chars``. The same text always gives the same chunks, so chunk ids
(``<package_path>#<n>``) are stable across runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_CHARS = 1200
_PARAGRAPH = re.compile(r"\n[ \t]*\n+")
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+")


def chunk_text(text: str, max_chars: int = MAX_CHARS) -> list[str]:
    """Split ``text`` into chunks of at most ``max_chars`` characters, paragraph-aware and deterministic."""
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _pack(_PARAGRAPH.split(text), max_chars, "\n\n")


def _pack(units: Iterable[str], max_chars: int, sep: str) -> list[str]:
    pieces: list[str] = []
    for unit in units:
        unit = unit.strip("\n")
        if unit.strip():
            pieces.extend(_split_long(unit, max_chars))
    chunks: list[str] = []
    current = ""
    for piece in pieces:
        if not current:
            current = piece
        elif len(current) + len(sep) + len(piece) <= max_chars:
            current = current + sep + piece
        else:
            chunks.append(current)
            current = piece
    if current:
        chunks.append(current)
    return chunks


def _split_long(unit: str, max_chars: int) -> list[str]:
    if len(unit) <= max_chars:
        return [unit]
    lines = unit.split("\n")
    if len(lines) > 1:
        return _pack(lines, max_chars, "\n")
    sentences = _SENTENCE_END.split(unit)
    if len(sentences) > 1:
        return _pack(sentences, max_chars, " ")
    words = unit.split(" ")
    if len(words) > 1:
        return _pack(words, max_chars, " ")
    return [unit[i : i + max_chars] for i in range(0, len(unit), max_chars)]
