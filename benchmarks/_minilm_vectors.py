"""Real embeddings for the storage benchmark: MiniLM over this machine's documentation, cached on disk.

    python benchmarks/_minilm_vectors.py [--passages 20000]   # embed now (minutes), so a benchmark run need not

Passages are the texts the eval sets of ``benchmarks/evalsets/build.py`` read (the GNU info manuals' nodes,
the FAQ answers, the README files under /usr/share/doc), cut into sentence-packed passages of at most
:data:`PASSAGE_CHARS` characters; queries are the two eval sets' queries (the info headings and the FAQ
questions), which are not in the corpus. Nothing is downloaded: the model comes from the ``minilm`` extra.
The matrices are cached under ``$RAGSTORE_BENCH_CACHE`` (default ``~/.cache/ragstore-bench``), keyed by a
hash of the texts, so a second run reads them back in a second.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent / "evalsets"))
import build as evalsets

PASSAGE_CHARS = 240
_SENTENCE = re.compile(r"(?<=[.!?:;])\s+|\n\s*\n")


def _passages_of(text: str) -> Iterator[str]:
    """Sentences of ``text`` packed into passages of at most PASSAGE_CHARS characters (whitespace folded);
    passages under 40 characters (a heading, a stray line) are dropped."""
    current = ""
    for sentence in _SENTENCE.split(text):
        sentence = " ".join(sentence.split())[:PASSAGE_CHARS]
        if not sentence:
            continue
        if current and len(current) + 1 + len(sentence) > PASSAGE_CHARS:
            if len(current) >= 40:
                yield current
            current = sentence
        else:
            current = f"{current} {sentence}".strip()
    if len(current) >= 40:
        yield current


def passages(limit: int) -> list[str]:
    """Up to ``limit`` distinct passages, the sources interleaved so that a limit keeps some of each."""
    sources = [
        [body for _, _, body in evalsets.info_nodes()],
        [answer for *_, answer in evalsets.faq_pairs()],
        [text for *_, text in evalsets.readme_distractors(100_000)],
    ]
    streams = [(p for text in texts for p in _passages_of(text)) for texts in sources]
    seen: set[str] = set()
    out: list[str] = []
    while streams and len(out) < limit:
        for stream in list(streams):
            passage = next(stream, None)
            if passage is None:
                streams.remove(stream)
            elif passage not in seen:
                seen.add(passage)
                out.append(passage)
    return out[:limit]


def queries() -> list[str]:
    """The eval sets' queries: the info headings and the FAQ questions (distinct, in order)."""
    texts = [title for _, title, _ in evalsets.info_nodes()] + [q for _, q, _ in evalsets.faq_pairs()]
    return list(dict.fromkeys(t for t in texts if t.strip()))


def _cache_dir() -> Path:
    return Path(os.environ.get("RAGSTORE_BENCH_CACHE", Path.home() / ".cache" / "ragstore-bench"))


def embedded(texts: list[str], label: str) -> np.ndarray:
    """MiniLM embeddings of ``texts`` (unit rows), from the cache when the same texts were embedded before."""
    key = hashlib.sha256("\0".join(texts).encode()).hexdigest()[:16]
    path = _cache_dir() / f"minilm-{label}-{len(texts)}-{key}.npy"
    if path.exists():
        return np.load(path)
    from ragstore.embed.minilm import MiniLMBackend

    backend = MiniLMBackend()
    started = time.perf_counter()
    parts = []
    for start in range(0, len(texts), 2000):
        parts.append(backend.embed(texts[start : start + 2000]))
        done = start + len(parts[-1])
        print(f"  minilm {label}: {done:,}/{len(texts):,} in {time.perf_counter() - started:.0f} s", flush=True)
    matrix = np.concatenate(parts).astype(np.float32) if parts else np.zeros((0, 384), np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, matrix)
    return matrix


def minilm_data(limit: int) -> tuple[np.ndarray, np.ndarray]:
    """(corpus, queries) as MiniLM unit vectors: ``limit`` passages and the eval sets' queries."""
    return embedded(passages(limit), "passages"), embedded(queries(), "queries")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=20_000)
    args = parser.parse_args()
    data, qs = minilm_data(args.passages)
    print(f"{len(data):,} passages and {len(qs):,} queries embedded ({_cache_dir()})")


if __name__ == "__main__":
    main()
