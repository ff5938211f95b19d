"""nDCG@10 of MiniLM retrieval over three chunkings of the same documents, in one run: the eval set's own
chunks (about 900-1,200 characters, cut outside ragstore), ragstore's chunker in MiniLM word pieces, and
the same with the title prefix in the embedded text.

    python benchmarks/chunking_quality.py --dataset DIR [--dataset DIR ...] [--docs 200] [--cache FILE] \
        [--variant TOKENS:OVERLAP:SPACING:PREFIX[:SEGMENT] ...]

Each DIR holds ``corpus.jsonl``, ``queries.jsonl`` and ``qrels.tsv`` (benchmarks/evalsets/build.py writes
two; the manpages set has the same layout). A document is the chunks of one item (the chunk id before
``#``) joined by blank lines, titled by its package path's last part (the page or manual name); with
``--docs N`` only the first N documents and the queries whose relevant documents are all among them are
kept. The sets' bodies carry no headings, so the prefix is the title alone.

Retrieval is exact cosine over the chunks (what ``--mode exact`` ranks); since the chunkings differ, a
ranking is scored by documents: chunks are mapped to their document, the first occurrence kept, and a
document's grade is the best grade the qrels give its chunks. Every text is embedded by one MiniLM
backend in this process; ``uptime`` is printed before and after.

A ``--variant`` is one chunking of ragstore's chunker: the window in word pieces, the overlap, the anchor
spacing (a fraction of the window, :data:`ragstore.ingest.chunker.ANCHOR_SPACING`) and the title prefix
(0 or 1), and optionally the shortest run between two anchors that keeps the second (a fraction of the
window, :data:`ragstore.ingest.chunker.MIN_SEGMENT`; 0 keeps every anchor); by default ``254:0:D:0:0``
(every anchor kept, the chunker before short runs were merged), ``254:0:D:0`` and ``254:0:D:1``, ``D``
the chunker's own spacing and the shortest run its own. ``--cache FILE``
keeps every vector by the sha256 of its text (a pickle), so a second run embeds only the texts it has
not seen: the vectors are those of the same model, the nDCG the same as without the cache.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import pickle
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from ragstore.embed.minilm import MiniLMBackend
from ragstore.ingest import chunker
from ragstore.ingest.chunker import chunk_document, window_for
from ragstore.ingest.document import Document, Section


def load(folder: Path, limit: int) -> tuple[dict[str, Document], dict[str, str], dict[str, dict[str, int]], dict]:
    parts: dict[str, list[str]] = defaultdict(list)
    titles: dict[str, str] = {}
    with (folder / "corpus.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            doc = row["chunk_id"].rsplit("#", 1)[0]
            if doc not in parts and limit and len(parts) == limit:
                continue
            parts[doc].append(row["text"])
            titles[doc] = row["package_path"].rsplit("/", 1)[-1].removesuffix(".gz")
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    for line in (folder / "qrels.tsv").read_text(encoding="utf-8").splitlines():
        query, chunk, grade = line.split("\t")
        doc = chunk.rsplit("#", 1)[0]
        qrels[query][doc] = max(qrels[query].get(doc, 0), int(grade))
    queries = {}
    with (folder / "queries.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            if row["query_id"] in qrels and all(doc in parts for doc in qrels[row["query_id"]]):
                queries[row["query_id"]] = row["text"]
    # One section of the joined text: the chunker cuts it at its blank lines, as a reader's text; the
    # set's own chunk boundaries are not the document's structure (as blocks they would be kept whole).
    documents = {doc: Document((Section("\n\n".join(texts)),), titles[doc]) for doc, texts in parts.items()}
    old = {doc: texts for doc, texts in parts.items()}
    return documents, queries, qrels, old


def ndcg(ranked: list[str], grades: dict[str, int], k: int = 10) -> float:
    dcg = sum((2 ** grades.get(doc, 0) - 1) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    ideal = sorted(grades.values(), reverse=True)[:k]
    best = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / best if best else 0.0


class Cached:
    """MiniLM vectors by the sha256 of their text, kept in ``path`` (a pickle) when one is given."""

    def __init__(self, backend: MiniLMBackend, path: Path | None) -> None:
        self.backend = backend
        self.path = path
        self.vectors: dict[bytes, np.ndarray] = {}
        if path is not None and path.exists():
            self.vectors = pickle.loads(path.read_bytes())
        self.embedded = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        keys = [hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest() for text in texts]
        missing = sorted({key: text for key, text in zip(keys, texts, strict=True) if key not in self.vectors}.items())
        if missing:
            fresh = self.backend.embed([text for _, text in missing])
            for (key, _), row in zip(missing, fresh, strict=True):
                self.vectors[key] = np.asarray(row, dtype=np.float32)
            self.embedded += len(missing)
            if self.path is not None:
                self.path.write_bytes(pickle.dumps(self.vectors))
        return np.stack([self.vectors[key] for key in keys])


def score(
    backend: Cached, chunks: list[tuple[str, str]], queries: dict[str, str], qrels: dict, qv: np.ndarray
) -> float:
    matrix = backend.embed([text for _, text in chunks])
    owners = [doc for doc, _ in chunks]
    sims = qv @ matrix.T
    total = 0.0
    for row, query in zip(sims, queries, strict=True):
        ranked: list[str] = []
        for i in np.argsort(-row, kind="stable"):
            if owners[i] not in ranked:
                ranked.append(owners[i])
            if len(ranked) == 10:
                break
        total += ndcg(ranked, qrels[query])
    return total / len(queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", action="append", required=True, help="a folder with corpus/queries/qrels")
    parser.add_argument("--docs", type=int, default=0, help="the first N documents of each set (0: all)")
    parser.add_argument("--cache", type=Path, default=None, help="keep vectors by text in this file")
    parser.add_argument("--variant", action="append", default=[], help="TOKENS:OVERLAP:SPACING:PREFIX[:SEGMENT]")
    args = parser.parse_args()
    print("before:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), flush=True)
    minilm = MiniLMBackend()
    backend = Cached(minilm, args.cache)
    spacing, segment = chunker.ANCHOR_SPACING, chunker.MIN_SEGMENT
    default = [f"254:0:{spacing}:0:0", f"254:0:{spacing}:0", f"254:0:{spacing}:1"]
    variants = [v.split(":") for v in args.variant or default]
    for folder in map(Path, args.dataset):
        started = time.perf_counter()
        documents, queries, qrels, old = load(folder, args.docs)
        qv = backend.embed(list(queries.values()))
        rows = {"set's chunks": [(doc, text) for doc, texts in old.items() for text in texts]}
        for tokens, overlap, anchors, prefix, *merge in variants:
            window = window_for(minilm, int(tokens), int(overlap))
            chunker.ANCHOR_SPACING = float(anchors)
            chunker.MIN_SEGMENT = float(merge[0]) if merge else segment
            name = f"chunker {window.limit} tokens, overlap {overlap}, spacing {anchors}, prefix {prefix}"
            name += f", min segment {chunker.MIN_SEGMENT:g}"
            rows[name] = [
                (doc, chunk.text)
                for doc, document in documents.items()
                for chunk in chunk_document(document, window, overlap=int(overlap), prefix=prefix == "1")
            ]
            chunker.ANCHOR_SPACING, chunker.MIN_SEGMENT = spacing, segment
        for name, chunks in rows.items():
            value = score(backend, chunks, queries, qrels, qv)
            print(
                f"{folder.name}\t{name}\t{len(documents)} docs\t{len(queries)} queries\t{len(chunks)} chunks\t"
                f"nDCG@10 {value:.4f}",
                flush=True,
            )
        print(f"{folder.name}: {time.perf_counter() - started:.0f} s, {backend.embedded} texts embedded", flush=True)
    print("after:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
