"""The documents' bars through the command a user runs (``python -m ragstore.cli`` in a subprocess): a folder
mixing every format read by its readers, as ``index --json`` lists them, with the image listed as not read
and phrases of the PDF and of the gzipped man page found by ``search``; a paragraph edited in the middle of
a 40-chunk document, or inserted at its top, writes at most 2 chunks; a reader published in the
``ragstore.readers`` entry-point group reads its files; no chunk stored in a MiniLM family is over the
model's window."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ragstore import families
from ragstore.embed.offline import OfflineBackend
from tests.toolkit.document_readers import mixed_folder

WORDS = "river stone lamp orchard violin copper meadow harbour lantern pebble quartz willow saddle ember".split()


def ragstore(dsn: str, home: Path, *args: str, pythonpath: Path | None = None) -> Any:
    """Run the CLI; its JSON output parsed (the run must succeed)."""
    env = {**os.environ, "RAGSTORE_HOME": str(home)}
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    command = [sys.executable, "-m", "ragstore.cli", "--dsn", dsn, *args, "--json"]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, (done.stdout, done.stderr)
    return json.loads(done.stdout)


@pytest.fixture
def docs_family(conn: Any) -> str:
    families.create_family(conn, "docs", OfflineBackend())
    return "docs"


def test_a_mixed_folder_lists_each_documents_reader_and_its_phrases_are_found(
    dsn: str, docs_family: str, tmp_path: Path
) -> None:
    docs = mixed_folder(tmp_path / "docs")
    home = tmp_path / "home"
    report = ragstore(dsn, home, "index", docs_family, str(docs))
    assert report["inserted"] == 7, report
    assert report["documents"] == [
        {"path": "docs/README", "reader": "text"},
        {"path": "docs/api.rst", "reader": "rst"},
        {"path": "docs/guide.pdf", "reader": "pdf"},
        {"path": "docs/intro.md", "reader": "markdown"},
        {"path": "docs/notes.docx", "reader": "docx"},
        {"path": "docs/page.html", "reader": "html"},
        {"path": "docs/prune.1.gz", "reader": "man"},
    ]
    assert report["skipped_files"] == [{"path": str(docs / "logo.png"), "reason": "no reader for .png"}]
    for phrase, package, reader in (
        ("quinces ripen", "docs/guide.pdf", "pdf"),
        ("cut back branches", "docs/prune.1.gz", "man"),
    ):
        hits = ragstore(dsn, home, "search", docs_family, phrase, "--mode", "fts")["hits"]
        assert hits[0]["package_path"] == package, hits
        assert hits[0]["metadata"]["reader"] == reader


def paragraphs(n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    return [f"Paragraph {i}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 70))) + "." for i in range(n)]


def _write(folder: Path, paras: list[str]) -> None:
    (folder / "guide.md").write_text("# Guide\n\n" + "\n\n".join(paras) + "\n", encoding="utf-8")


@pytest.mark.parametrize("edit", ["middle", "top"])
def test_one_paragraph_edited_or_inserted_writes_at_most_two_chunks(
    dsn: str, docs_family: str, tmp_path: Path, edit: str
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    home = tmp_path / "home"
    paras = paragraphs(96)
    _write(docs, paras)
    first = ragstore(dsn, home, "index", docs_family, str(docs))
    assert 38 <= first["inserted"] <= 60, first  # a document of about 40 chunks
    if edit == "middle":
        paras[48] = paras[48].replace("Paragraph 48:", "Paragraph 48, now edited:")
    else:
        paras.insert(0, "A new opening paragraph about lanterns and quartz.")
    _write(docs, paras)
    again = ragstore(dsn, home, "index", docs_family, str(docs))
    written = again["inserted"] + again["updated"]
    assert 1 <= written <= 2 and again["embedded"] == written, again
    assert again["unchanged"] >= first["inserted"] - 2 and again["pruned"] <= 2, again
    assert ragstore(dsn, home, "index", docs_family, str(docs))["unchanged"] == again["unchanged"] + written


def test_a_reader_published_as_an_entry_point_reads_its_files(dsn: str, docs_family: str, tmp_path: Path) -> None:
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "fruitreader.py").write_text(
        "from ragstore.ingest.document import Document, Section\n"
        "class FruitReader:\n"
        "    name = 'fruit'\n"
        "    suffixes = ('.fruit',)\n"
        "    def read(self, data, path):\n"
        "        return Document((Section(data.decode().upper(), heading=('Basket',)),), 'Fruit')\n"
    )
    info = plugin / "fruitreader-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fruitreader\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[ragstore.readers]\nfruit = fruitreader:FruitReader\n")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "basket.fruit").write_text("quince and medlar")
    (docs / "notes.txt").write_text("plain notes")
    home = tmp_path / "home"
    report = ragstore(dsn, home, "index", docs_family, str(docs), pythonpath=plugin)
    assert report["documents"] == [
        {"path": "docs/basket.fruit", "reader": "fruit"},
        {"path": "docs/notes.txt", "reader": "text"},
    ]
    hits = ragstore(dsn, home, "search", docs_family, "medlar", "--mode", "fts", pythonpath=plugin)["hits"]
    assert [(h["text"], h["metadata"]["reader"], h["metadata"]["heading"]) for h in hits] == [
        ("QUINCE AND MEDLAR", "fruit", "Basket")
    ]


@pytest.mark.minilm
def test_no_chunk_stored_in_a_minilm_family_is_over_the_models_window(dsn: str, conn: Any, tmp_path: Path) -> None:
    from ragstore.embed.minilm import MAX_TOKENS, MiniLMBackend

    backend = MiniLMBackend()
    families.create_family(conn, "mini", backend)
    docs = tmp_path / "docs"
    docs.mkdir()
    # Long words are many word pieces: 1,200 characters of them are far more than the 256 the model reads.
    words = " ".join(f"Antidisestablishmentarianism{i} electroencephalography." for i in range(80))
    (docs / "long.md").write_text(f"# Install\n\n{words}\n\n## Build\n\n{'x' * 3000}\n\n- one\n- two\n")
    (docs / "page.html").write_text(f"<h1>Pneumonoultramicroscopic</h1><p>{words}</p>")
    report = ragstore(dsn, tmp_path / "home", "index", "mini", str(docs))
    assert report["truncated"] == 0 and report["embed_tokens"] > 0, report
    # The embed rate the text summary prints is in --json too.
    rate = report["embedded"] / report["embed_seconds"], report["embed_tokens"] / report["embed_seconds"]
    assert (report["embed_chunks_per_s"], report["embed_tokens_per_s"]) == (round(rate[0], 1), round(rate[1]))
    texts = [row[0] for row in conn.execute("SELECT text FROM ragstore.chunks WHERE family = 'mini'").fetchall()]
    counts = backend.count_tokens(texts)
    assert len(texts) == report["inserted"] > 6 and max(counts) <= MAX_TOKENS - 2, (len(texts), max(counts))
