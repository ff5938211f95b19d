"""Chunks sized for the family's model: ``--chunk-tokens`` / ``--overlap`` (and Store options) bound a
document's chunks in the model's own tokens, and a JSONL text the model would cut is never reported as
embedded whole: the run's report counts and names it, in text and JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ragstore import families
from ragstore.cli.main import cli
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import InvalidInput
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from tests.toolkit.family_migrate import vectors_for


class WordBackend:
    """A model that reads at most ``max_tokens`` words (its tokenizer: white space)."""

    name = "words"
    model = "words-20"
    dim = 8
    max_tokens = 20

    def __init__(self) -> None:
        self.calls: list[str] = []

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(text.split()) for text in texts]

    def embed(self, texts: Sequence[str]) -> Any:
        self.calls.extend(texts)
        return vectors_for(self.model, self.dim, [" ".join(t.split()[: self.max_tokens]) for t in texts])


@pytest.fixture
def words(conn: Any) -> WordBackend:
    backend = WordBackend()
    families.create_family(conn, "docs", backend)
    return backend


def texts(conn: Any) -> list[str]:
    rows = conn.execute("SELECT text FROM ragstore.chunks WHERE family = 'docs' ORDER BY chunk_id").fetchall()
    conn.commit()
    return [str(r[0]) for r in rows]


def test_a_jsonl_text_over_the_window_is_reported_not_passed_as_whole(
    conn: Any, words: WordBackend, tmp_path: Path
) -> None:
    path = tmp_path / "c.jsonl"
    rows = [
        {"chunk_id": "short", "package_path": "p", "text": "five words of plain text"},
        {"chunk_id": "long", "package_path": "p", "text": " ".join(f"w{i}" for i in range(30))},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = index_sources(conn, "docs", open_sources([str(path)]), backend=words)
    assert report.inserted == 2 and report.truncated == 1
    assert report.truncated_at == [f"{path}:2"]
    assert "1 text over the model's window" in report.summary() and f"{path}:2" in report.summary()
    assert report.embed_tokens == 5 + 20  # what the model read
    assert report.as_dict()["truncated"] == 1


def test_document_chunks_stay_within_chunk_tokens_and_overlap_repeats_the_tail(
    conn: Any, words: WordBackend, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("\n\n".join(" ".join(f"p{p}w{i}" for i in range(7)) for p in range(12)))
    report = index_sources(conn, "docs", open_sources([str(docs)]), backend=words, chunk_tokens=10, overlap=3)
    stored = texts(conn)
    assert report.truncated == 0 and len(stored) >= 12
    assert max(len(t.split()) for t in stored) <= 10
    # every chunk but the first begins with the last words of another chunk
    tails = {tuple(t.split()[-3:]) for t in stored}
    assert sum(1 for t in stored if tuple(t.split()[:3]) in tails) >= len(stored) - 1
    again = index_sources(conn, "docs", open_sources([str(docs)]), backend=words)  # default: the model's 20
    assert max(len(t.split()) for t in texts(conn)) <= 20 and again.pruned > 0


def test_an_overlap_not_below_the_window_is_one_line_naming_the_option(dsn: str, conn: Any, tmp_path: Path) -> None:
    families.create_family(conn, "docs", OfflineBackend())
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("some text")
    args = ["--dsn", dsn, "index", "docs", str(docs)]
    done = CliRunner().invoke(cli, [*args, "--chunk-tokens", "50", "--overlap", "50"])
    assert done.exit_code != 0
    assert done.output.strip().splitlines() == [done.output.strip()] and "--overlap" in done.output
    assert texts(conn) == []
    with pytest.raises(InvalidInput, match="overlap"):
        index_sources(conn, "docs", open_sources([str(docs)]), chunk_tokens=10, overlap=11)
    # characters for a backend without a tokenizer
    ok = CliRunner().invoke(cli, [*args, "--chunk-tokens", "4", "--json"])
    assert ok.exit_code == 0, ok.output
    assert sorted(texts(conn)) == sorted(["some", "text"])
