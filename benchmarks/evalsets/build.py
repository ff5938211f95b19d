"""Build two retrieval eval sets from documentation installed on this machine (no download, no network).

    python benchmarks/evalsets/build.py OUT_DIR            # writes OUT_DIR/gnuinfo and OUT_DIR/faq

Each set is a folder with ``corpus.jsonl`` (``chunk_id``, ``package_path``, ``text``), ``queries.jsonl``
(``query_id``, ``text``) and ``qrels.tsv`` (``query_id<TAB>chunk_id<TAB>grade``), the formats
``ragstore index`` and ``ragstore eval`` read. How the sets are made, and their biases:
benchmarks/evalsets/README.md.

- ``gnuinfo``: the GNU info manuals under /usr/share/info, split into nodes. A node's title (its
  heading, section number removed) is the query; the node's body, WITHOUT the heading, is chunked; the
  node's first chunk is graded 2 and its other chunks 1.
- ``faq``: question/answer pairs from the FAQ files under /usr/share/doc (a line ending in ``?`` that
  opens a numbered or ``Q:`` entry is a question, the text up to the next question its answer). The
  question is the query and is NOT in the corpus; the answer's first chunk is graded 2, its other chunks
  1. Chunks of the packages' README files are added as distractors (no query points at them).

The output is deterministic for the same installed files (sorted walks, no randomness).
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

INFO_DIR = Path("/usr/share/info")
DOC_DIR = Path("/usr/share/doc")
CHUNK_CHARS = 900  # MiniLM reads 256 word pieces, about 1,000 characters of English
MAX_CHUNKS_PER_ITEM = 4  # a long node or answer keeps its first four chunks
MIN_BODY_CHARS = 120
GNUINFO_MAX_QUERIES = 600
FAQ_DISTRACTOR_CHUNKS = 1500
FAQ_FILES = (
    "sed/sedfaq.txt.gz",
    "lsof/00FAQ.gz",
    "valgrind/FAQ.txt.gz",
    "zlib1g-dev/FAQ.gz",
    "xz-utils/faq.txt.gz",
    "procps/FAQ.gz",
    "man-db/FAQ",
    "gnupg/FAQ",
)
_INFO_NODE = re.compile(r"^File: [^,]+,\s+Node: ([^,\n]+)")
_SECTION_NUMBER = re.compile(r"^(?:[0-9A-Z]+(?:\.[0-9]+)*\.?|Appendix [A-Z])\s+")
_QUESTION = re.compile(r"^(?:Q:\s*|\d+(?:\.\d+)*\.?\s+)(\S.*)$")
_UNDERLINE = re.compile(r"^\s*[=\-*~.]{3,}\s*$")


def read_text(path: Path) -> str:
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    text = data.decode("utf-8", errors="replace")
    # info files mark index entries with NUL/backspace pairs; no control character but tab/newline stays
    return re.sub(r"\x00\x08\[[^\x00]*\x00\x08\]|[\x00-\x08\x0b\x0c\x0e-\x1e\x7f]", "", text)


def chunks_of(text: str) -> list[str]:
    """Paragraph-packed chunks of at most about CHUNK_CHARS characters (a longer paragraph is cut)."""
    out: list[str] = []
    current = ""
    for para in re.split(r"\n\s*\n", text):
        para = para.strip()
        if not para:
            continue
        while len(para) > CHUNK_CHARS:
            if current:
                out.append(current)
                current = ""
            cut = para.rfind(" ", 0, CHUNK_CHARS)
            cut = cut if cut > CHUNK_CHARS // 2 else CHUNK_CHARS
            out.append(para[:cut].strip())
            para = para[cut:].strip()
        if current and len(current) + len(para) + 2 > CHUNK_CHARS:
            out.append(current)
            current = ""
        current = f"{current}\n\n{para}" if current else para
    if current:
        out.append(current)
    return out


def info_nodes() -> Iterator[tuple[str, str, str]]:
    """(manual, title, body) of every node of every info manual (title without its section number)."""
    manuals: dict[str, list[Path]] = {}
    for path in sorted(INFO_DIR.glob("*.info*.gz")):
        manuals.setdefault(path.name.split(".info")[0], []).append(path)
    for manual, paths in sorted(manuals.items()):
        text = "".join(read_text(p) for p in sorted(paths, key=lambda p: (len(p.name), p.name)))
        for node in text.split("\x1f"):
            lines = node.strip("\n").split("\n")
            if not lines or not _INFO_NODE.match(lines[0]):
                continue
            body_lines = lines[1:]
            while body_lines and not body_lines[0].strip():
                body_lines.pop(0)
            if len(body_lines) < 2 or not _UNDERLINE.match(body_lines[1]):
                continue
            title = _SECTION_NUMBER.sub("", body_lines[0].strip()).strip("‘’'\" ")
            body = "\n".join(body_lines[2:])
            body = re.sub(r"^\* Menu:.*", "", body, flags=re.DOTALL | re.MULTILINE)  # the node's own menu
            if len(title) < 4 or len(body.strip()) < MIN_BODY_CHARS or title.lower() in ("index", "concept index"):
                continue
            yield manual, title, body


def faq_pairs() -> Iterator[tuple[str, str, str]]:
    """(package, question, answer) from the FAQ files; a table of contents (no answer) is skipped."""
    for rel in FAQ_FILES:
        path = DOC_DIR / rel
        if not path.exists():
            continue
        lines = read_text(path).split("\n")
        starts: list[tuple[int, int, str]] = []  # (first line, line after the question, question)
        i = 0
        while i < len(lines):
            match = _QUESTION.match(lines[i].strip())
            if match and not lines[i].startswith((" " * 6, "\t\t")):
                question, j = match.group(1).strip(), i + 1
                while (
                    not question.endswith("?")
                    and j < len(lines)
                    and j <= i + 2
                    and lines[j].strip()
                    and not _QUESTION.match(lines[j].strip())
                ):
                    question += " " + lines[j].strip()
                    j += 1
                if question.endswith("?") and 3 <= len(question.split()) <= 40:
                    starts.append((i, j, question))
                    i = j
                    continue
            i += 1
        best: dict[str, str] = {}
        for n, (_, after, question) in enumerate(starts):
            end = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
            answer = "\n".join(line for line in lines[after:end] if not _UNDERLINE.match(line)).strip()
            answer = re.sub(r"^A:\s*", "", answer)
            key = " ".join(question.lower().split())
            if len(answer) >= MIN_BODY_CHARS and len(answer) > len(best.get(key, "")):
                best[key] = answer
                best[key + "\x00q"] = question
        package = rel.split("/")[0]
        for key, answer in best.items():
            if not key.endswith("\x00q"):
                yield package, best[key + "\x00q"], answer


def readme_distractors(limit: int) -> Iterator[tuple[str, str]]:
    """(package_path, text) of README files under /usr/share/doc, chunked, up to ``limit`` chunks."""
    taken = 0
    for path in sorted(DOC_DIR.glob("*/README*")):
        if path.suffix not in ("", ".gz", ".txt", ".md", ".Debian") and not path.name.endswith(".txt.gz"):
            continue
        try:
            text = read_text(path)
        except OSError:
            continue
        for chunk in chunks_of(text)[:MAX_CHUNKS_PER_ITEM]:
            if len(chunk) < MIN_BODY_CHARS:
                continue
            yield f"{path.parent.name}/{path.name}", chunk
            taken += 1
            if taken >= limit:
                return


def write_set(out: Path, items: list[tuple[str, str, str, str]], extra: list[tuple[str, str]]) -> tuple[int, int]:
    """Write one set; items are (item_id, package_path, query, body). Returns (chunks, queries)."""
    out.mkdir(parents=True, exist_ok=True)
    n_chunks = n_queries = 0
    counts: dict[str, int] = {}
    for _, _, query, _ in items:
        key = " ".join(query.lower().split())
        counts[key] = counts.get(key, 0) + 1
    with (
        (out / "corpus.jsonl").open("w", encoding="utf-8") as corpus,
        (out / "queries.jsonl").open("w", encoding="utf-8") as queries,
        (out / "qrels.tsv").open("w", encoding="utf-8") as qrels,
    ):
        for item_id, package_path, query, body in items:
            parts = [c for c in chunks_of(body)[:MAX_CHUNKS_PER_ITEM] if c.strip()]
            # A heading found more than once ("Introduction", a licence) cannot say which item it means:
            # its chunks stay in the corpus, with no query.
            asked = counts[" ".join(query.lower().split())] == 1
            for n, text in enumerate(parts):
                chunk_id = f"{item_id}#{n}"
                corpus.write(json.dumps({"chunk_id": chunk_id, "package_path": package_path, "text": text}) + "\n")
                if asked:
                    qrels.write(f"{item_id}\t{chunk_id}\t{2 if n == 0 else 1}\n")
                n_chunks += 1
            if asked and parts:
                queries.write(json.dumps({"query_id": item_id, "text": query}) + "\n")
                n_queries += 1
        for n, (package_path, text) in enumerate(extra):
            corpus.write(json.dumps({"chunk_id": f"readme/{n}", "package_path": package_path, "text": text}) + "\n")
            n_chunks += 1
    return n_chunks, n_queries


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: python benchmarks/evalsets/build.py OUT_DIR")
    out = Path(sys.argv[1])
    nodes = list(info_nodes())
    # Spread the queries over the manuals: every k-th node, so no single manual dominates.
    step = max(1, len(nodes) // GNUINFO_MAX_QUERIES + (1 if len(nodes) % GNUINFO_MAX_QUERIES else 0))
    info_items = [
        (f"{manual}/{n}", f"{manual}.info", title, body)
        for n, (manual, title, body) in enumerate(nodes)
        if n % step == 0
    ]
    chunks, queries = write_set(out / "gnuinfo", info_items, [])
    print(f"gnuinfo: {chunks} chunks, {queries} queries (of {len(nodes)} nodes)")
    faq_items = [(f"{pkg}/{n}", f"{pkg}/FAQ", q, a) for n, (pkg, q, a) in enumerate(faq_pairs())]
    chunks, queries = write_set(out / "faq", faq_items, list(readme_distractors(FAQ_DISTRACTOR_CHUNKS)))
    print(f"faq: {chunks} chunks, {queries} queries")


if __name__ == "__main__":
    main()
