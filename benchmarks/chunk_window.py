"""Share of chunks over MiniLM's window: the manpages corpus as cut at 1,200 characters, against the same
pages chunked by ragstore/ingest/chunker.py in MiniLM word pieces. Prints both in one run.

    .venv/bin/python benchmarks/chunk_window.py PATH/TO/manpages/corpus.jsonl

A page's document is its chunks of the corpus joined by blank lines, its title the page name.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict

from ragstore.embed.minilm import MiniLMBackend
from ragstore.ingest.chunker import chunk_document, window_for
from ragstore.ingest.document import Document, Section


def main(path: str) -> None:
    pages: dict[str, list[str]] = defaultdict(list)
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            pages[record["package_path"]].append(record["text"])
    backend = MiniLMBackend()
    window = window_for(backend)
    before = backend.count_tokens([text for texts in pages.values() for text in texts])
    for prefix in (False, True):
        after = []
        for package, texts in pages.items():
            title = package.rsplit("/", 1)[-1].removesuffix(".gz")
            document = Document((Section("\n\n".join(texts)),), title)
            after.extend(backend.count_tokens([c.text for c in chunk_document(document, window, prefix=prefix)]))
        for name, counts in (("1,200 characters", before), (f"window {window.limit} tokens, prefix={prefix}", after)):
            over = sum(1 for n in counts if n > window.limit)
            ordered = sorted(counts)
            print(
                f"{name}: {len(counts)} chunks, {over} over {window.limit} tokens ({over / len(counts):.1%}), "
                f"median {ordered[len(ordered) // 2]}, longest {ordered[-1]}"
            )


if __name__ == "__main__":
    main(sys.argv[1])
