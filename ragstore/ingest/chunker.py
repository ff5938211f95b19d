"""Deterministic, structure-aware chunking of documents, sized in the family model's own units.

A document's sections (:class:`~ragstore.ingest.document.Section`) are chunked one by one, never across
each other, so each chunk has one heading path and one page. Inside a section the blocks (paragraphs,
lists, code blocks; fenced code stays one block) are packed into chunks of at most ``window.limit``
units: word pieces of the family's tokenizer when it has one (MiniLM: 256 minus its two special tokens),
characters otherwise. A block longer than the window is split on lines, then sentences, then words, then
hard.

Where a chunk ends is decided by the content, not only by the running length (content-defined chunking,
as rsync and restic cut files): every block is an *anchor* or not by its own text alone (its hash, read as
a fraction of 1, is below its cost over half the window, so anchors come about every half window of
text), and a chunk always ends before an anchor, else when the next block would not fit. An anchor less
than a quarter window of text after the one before it (:data:`MIN_SEGMENT`) is dropped, so that short
paragraphs do not make chunks of their own; whether it is dropped also reads only the text between the
two anchors. Chunks so never
cross an anchor, and the anchors do not depend on where the chunk before ended: an edit, or a paragraph
inserted at the top, changes only the chunks between the anchors around it, and every other chunk stays
the same text (and keeps its id: :func:`chunk_ids`).

Counting word pieces one block at a time is exact for WordPiece: its pre-tokenizer splits at white
space, so the pieces of ``a\\n\\nb`` are those of ``a`` then those of ``b``; every chunk is counted once
more whole, and one over the window is split again, so no chunk is ever over it.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ragstore.ingest.document import Document, Section

MAX_CHARS = 1200
HEADING_SEPARATOR = " > "
_PARAGRAPH = re.compile(r"\n[ \t]*\n+")
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})", re.MULTILINE)
#: Anchors come about once per this fraction of the window (a block's chance is its cost over it).
ANCHOR_SPACING = 1 / 2
#: An anchor counts only when the run of text from the anchor before it holds at least this fraction of
#: the window (0 keeps every anchor): a short run joins the next one (docs/decisions.md).
MIN_SEGMENT = 1 / 4

Counter = Callable[[Sequence[str]], list[int]]


def count_characters(texts: Sequence[str]) -> list[int]:
    return [len(text) for text in texts]


@dataclass(frozen=True)
class Window:
    """How long a chunk may be: ``limit`` ``unit``s as ``count`` measures them (one number per text), how
    many of them of the chunk before a document's chunks repeat at their start (``overlap``), and whether
    each chunk starts with its :func:`heading_prefix` (``prefix``, the family option ``title_prefix``)."""

    limit: int = MAX_CHARS
    unit: str = "characters"
    count: Counter = count_characters
    overlap: int = 0
    prefix: bool = False

    def __post_init__(self) -> None:
        if self.limit < 1:
            raise ValueError("a chunk window must be at least 1")
        if self.overlap < 0 or self.overlap >= self.limit:
            raise ValueError(
                f"the overlap must be at least 0 and less than the chunk window ({self.limit} {self.unit})"
            )

    @property
    def separator_cost(self) -> int:
        """What the ``\\n\\n`` between two blocks costs: two characters, no word piece."""
        return 2 if self.unit == "characters" else 0


CHARACTERS = Window()


def window_for(backend: object, chunk_tokens: int | None = None, overlap: int = 0, prefix: bool = False) -> Window:
    """The chunk window of a family's backend: its word pieces when it can count them (``count_tokens``
    and ``max_tokens``, as MiniLM), at most ``chunk_tokens`` of them (never more than the model reads);
    else characters, ``chunk_tokens`` of them (default 1,200). ``overlap`` is in the same unit; ValueError
    when it is not less than the window. ``prefix``: each chunk starts with its title and heading path."""
    count = getattr(backend, "count_tokens", None)
    limit = getattr(backend, "max_tokens", None)
    if callable(count) and isinstance(limit, int):
        return Window(min(limit, chunk_tokens or limit), "tokens", count, overlap, prefix)
    return Window(chunk_tokens or MAX_CHARS, overlap=overlap, prefix=prefix)


@dataclass(frozen=True)
class Chunk:
    """A chunk's text (its heading prefix included when one was asked for), heading path and page."""

    text: str
    heading: tuple[str, ...] = ()
    page: int | None = None


def paragraphs(text: str) -> list[str]:
    """``text`` cut at blank lines, a fenced code block (```` ``` ```` or ``~~~``) kept whole."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not _FENCE.search(text):
        return [p.strip("\n") for p in _PARAGRAPH.split(text) if p.strip()]
    out: list[str] = []
    current: list[str] = []
    fence = ""
    for line in text.split("\n"):
        if fence:
            current.append(line)
            if line.strip().startswith(fence):
                fence = ""
            continue
        opened = _FENCE.match(line)
        if opened:
            fence = opened.group(1)
        if not line.strip() and not fence:
            if current:
                out.append("\n".join(current))
                current = []
            continue
        current.append(line)
    if current:
        out.append("\n".join(current))
    return [p for p in out if p.strip()]


def heading_prefix(title: str, heading: tuple[str, ...]) -> str:
    """``Title > Install > From source``: the title, then the heading path (the title once when the
    path starts with it)."""
    parts = [part for part in heading if part]
    if title and (not parts or parts[0] != title):
        parts.insert(0, title)
    return HEADING_SEPARATOR.join(parts)


def chunk_document(
    document: Document, window: Window = CHARACTERS, *, overlap: int = 0, prefix: bool = False
) -> list[Chunk]:
    """The chunks of ``document``, each at most ``window.limit`` units long; with ``prefix`` each starts
    with its :func:`heading_prefix` and a blank line; with ``overlap`` each but a section's first starts
    with the last words of the chunk before it, at most ``overlap`` units of them. Deterministic."""
    if overlap < 0 or overlap >= window.limit:
        raise ValueError("overlap must be at least 0 and less than the chunk window")
    out: list[Chunk] = []
    for section in document.sections:
        head = heading_prefix(document.title, section.heading) if prefix else ""
        reserve = 0
        if head:
            reserve = window.count([head])[0] + window.separator_cost
            if reserve > window.limit // 2:  # a heading path too long to repeat: cut it
                head, reserve = "", 0
        budget = window.limit - reserve - overlap
        for text in _chunk_section(section, window, max(1, budget), overlap):
            out.append(Chunk(f"{head}\n\n{text}" if head else text, section.heading, section.page))
    return _enforce(out, window)


def chunk_text(text: str, max_chars: int = MAX_CHARS) -> list[str]:
    """``text`` (one section) in chunks of at most ``max_chars`` characters, paragraph-aware."""
    if max_chars < 1:
        raise ValueError("max_chars must be positive")
    document = Document((Section(text),))
    return [chunk.text for chunk in chunk_document(document, Window(max_chars))]


def chunk_ids(package: str, chunks: Sequence[Chunk]) -> list[str]:
    """Ids anchored in content: ``<package>#<16 hex>`` of the sha256 of the heading path and text, the
    n-th repeat of one (heading, text) in a document getting ``-n`` (from 2), in reading order."""
    seen: dict[str, int] = {}
    ids = []
    for chunk in chunks:
        key = "\x1f".join(chunk.heading) + "\x1e" + chunk.text
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        seen[digest] = seen.get(digest, 0) + 1
        ids.append(f"{package}#{digest}" + (f"-{seen[digest]}" if seen[digest] > 1 else ""))
    return ids


# -- inside a section -----------------------------------------------------------------------------
def _anchor(block: str, cost: int, budget: int) -> bool:
    """Whether a chunk ends before ``block``: by its text and cost alone, with chance cost / spacing."""
    digest = hashlib.sha256(block.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:4], "big") / 2**32 < cost / (budget * ANCHOR_SPACING)


def _chunk_section(section: Section, window: Window, budget: int, overlap: int) -> list[str]:
    blocks = list(section.blocks) if section.blocks else paragraphs(section.text)
    units: list[tuple[str, int, bool]] = []  # text, cost, may a chunk end before it
    for block, cost in zip(blocks, window.count(blocks), strict=True):
        if cost <= budget:
            units.append((block, cost, _anchor(block, cost, budget)))
        else:
            pieces = _split_long(block, window, budget)
            units.extend((piece, cost, i == 0) for i, (piece, cost) in enumerate(pieces))
    units = _kept_anchors(units, MIN_SEGMENT * budget, window.separator_cost)
    chunks: list[list[str]] = []
    current: list[str] = []
    used = 0
    sep = window.separator_cost
    for text, cost, anchor in units:
        if current and (anchor or used + sep + cost > budget):
            chunks.append(current)
            current, used = [], 0
        used += (sep if current else 0) + cost
        current.append(text)
    if current:
        chunks.append(current)
    joined = ["\n\n".join(chunk) for chunk in chunks]
    if overlap and len(joined) > 1:
        tails = [_tail(previous, window, overlap) + text for previous, text in itertools.pairwise(joined)]
        joined = [joined[0], *tails]
    return joined


def _kept_anchors(units: list[tuple[str, int, bool]], least: float, sep: int) -> list[tuple[str, int, bool]]:
    """``units`` with the anchors whose run before them (from the anchor before, or the section's start)
    costs less than ``least`` dropped: each decision reads only the text between two anchors."""
    out: list[tuple[str, int, bool]] = []
    run = 0
    for text, cost, anchor in units:
        if out and anchor:
            out.append((text, cost, run >= least))
            run = cost
        else:
            run += (sep if out else 0) + cost
            out.append((text, cost, anchor))
    return out


def _tail(text: str, window: Window, overlap: int) -> str:
    """The last words of ``text`` that fit in ``overlap`` units, with a line break after them."""
    words = text.split()
    costs = window.count(words) if words else []
    kept: list[str] = []
    used = 0
    for word, cost in zip(reversed(words), reversed(costs), strict=True):
        if used + cost + (1 if window.unit == "characters" else 0) > overlap:
            break
        used += cost + (1 if window.unit == "characters" else 0)
        kept.append(word)
    return (" ".join(reversed(kept)) + "\n") if kept else ""


def _split_long(block: str, window: Window, budget: int) -> list[tuple[str, int]]:
    """A block over ``budget`` cut on lines, sentences, words, then hard; pieces packed greedily."""
    for pattern, sep in (("\n", "\n"), (_SENTENCE_END, " "), (" ", " ")):
        parts = block.split(pattern) if isinstance(pattern, str) else pattern.split(block)
        parts = [part for part in parts if part.strip()]
        if len(parts) > 1:
            return _pack(parts, window, budget, sep)
    return _hard(block, window, budget)


def _pack(parts: list[str], window: Window, budget: int, sep: str) -> list[tuple[str, int]]:
    sep_cost = len(sep) if window.unit == "characters" else 0
    out: list[tuple[str, int]] = []
    current: list[str] = []
    used = 0
    for part, cost in zip(parts, window.count(parts), strict=True):
        if cost > budget:
            if current:
                out.append((sep.join(current), used))
                current, used = [], 0
            out.extend(_split_long(part, window, budget))
            continue
        if current and used + sep_cost + cost > budget:
            out.append((sep.join(current), used))
            current, used = [], 0
        used += (sep_cost if current else 0) + cost
        current.append(part)
    if current:
        out.append((sep.join(current), used))
    return out


def _hard(text: str, window: Window, budget: int) -> list[tuple[str, int]]:
    """One word over ``budget``: slices of ``budget`` characters, halved until they fit in tokens."""
    size = budget
    while True:
        pieces = [text[i : i + size] for i in range(0, len(text), size)]
        costs = window.count(pieces)
        if max(costs) <= budget or size == 1:
            return list(zip(pieces, costs, strict=True))
        size = max(1, size // 2)


def _enforce(chunks: list[Chunk], window: Window) -> list[Chunk]:
    """Every chunk counted whole once more; one over the window (a tokenizer that is not additive) is
    cut at white space near its middle until its pieces fit."""
    costs = window.count([chunk.text for chunk in chunks]) if chunks else []
    if all(cost <= window.limit for cost in costs):
        return chunks
    out: list[Chunk] = []
    for chunk, cost in zip(chunks, costs, strict=True):
        out.extend([chunk] if cost <= window.limit else _halve(chunk, window))
    return out


def _halve(chunk: Chunk, window: Window) -> list[Chunk]:
    text = chunk.text
    if window.count([text])[0] <= window.limit:
        return [chunk]
    middle = len(text) // 2
    cut = text.rfind(" ", 0, middle)
    cut = cut if cut > 0 else middle
    halves = [text[:cut].strip(), text[cut:].strip()]
    return [part for half in halves if half for part in _halve(Chunk(half, chunk.heading, chunk.page), window)]
