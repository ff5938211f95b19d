"""The embedding cache: the same text is never embedded twice for the same model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragstore import families
from ragstore.embed.cache import cache_key, embed_cached, lookup
from ragstore.embed.offline import OfflineBackend
from ragstore.families.migrate import migrate_family
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from tests.toolkit.family_migrate import HashBackend, vectors_for, write_jsonl


def index(conn: Any, path: Path, backend: Any, **kw: Any) -> Any:
    return index_sources(conn, "docs", open_sources([str(path)]), backend=backend, **kw)


def cache_rows(conn: Any) -> dict[str, int]:
    rows = conn.execute("SELECT model, count(*) FROM ragstore.embedding_cache GROUP BY model").fetchall()
    conn.commit()
    return {m: int(n) for m, n in rows}


@pytest.fixture
def fake(conn: Any) -> HashBackend:
    backend = HashBackend()
    families.create_family(conn, "docs", backend)
    return backend


def test_reindexing_a_renamed_file_costs_no_embedding_call(conn: Any, fake: HashBackend, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "old-name.md").write_text("\n\n".join(f"Paragraph {i} about caching. " * 20 for i in range(5)))
    first = index(conn, folder, fake)
    assert first.embedded == len(fake.calls) > 0
    (folder / "old-name.md").rename(folder / "new-name.md")
    again = HashBackend()
    report = index(conn, folder, again, prune=True)
    assert again.calls == [] and report.embedded == 0
    assert report.inserted == first.inserted and report.pruned == first.inserted
    ids = [r[0] for r in conn.execute("SELECT chunk_id FROM ragstore.emb_docs").fetchall()]
    assert ids and all(i.startswith("docs/new-name.md#") for i in ids)


def test_switching_models_back_and_forth_costs_nothing_after_the_first_time(
    conn: Any, fake: HashBackend, tmp_path: Path
) -> None:
    index(conn, write_jsonl(tmp_path / "c.jsonl", 30), fake)
    to_b = HashBackend(model="hash-b")
    migrate_family(conn, "docs", to_b)
    assert len(to_b.calls) == 30
    back_a, again_b = HashBackend(model="hash-a"), HashBackend(model="hash-b")
    migrate_family(conn, "docs", back_a)
    migrate_family(conn, "docs", again_b)
    assert back_a.calls == [] and again_b.calls == []
    table = families.get_family(conn, "docs").table
    texts = [f"text c {i}" for i in range(30)]
    rows = conn.execute(f'SELECT embedding FROM ragstore."{table}" ORDER BY chunk_id').fetchall()
    got = np.stack([r[0].to_numpy() for r in rows])
    assert np.allclose(got, vectors_for("hash-b", 8, texts))


def test_a_family_indexed_before_the_cache_seeds_it_when_it_migrates_away(
    conn: Any, fake: HashBackend, tmp_path: Path
) -> None:
    index(conn, write_jsonl(tmp_path / "c.jsonl", 12), fake)
    conn.execute("TRUNCATE ragstore.embedding_cache")
    conn.commit()
    migrate_family(conn, "docs", HashBackend(model="hash-b"))
    back = HashBackend(model="hash-a")
    migrate_family(conn, "docs", back)
    assert back.calls == []


def test_offline_backend_skips_the_cache(conn: Any, tmp_path: Path) -> None:
    families.create_family(conn, "docs", OfflineBackend())
    report = index(conn, write_jsonl(tmp_path / "c.jsonl", 10), OfflineBackend())
    assert report.embedded == 10 and cache_rows(conn) == {}


def test_cache_is_keyed_by_backend_model_and_dimension(conn: Any, fake: HashBackend, tmp_path: Path) -> None:
    index(conn, write_jsonl(tmp_path / "c.jsonl", 5), fake)
    assert cache_rows(conn) == {"fake:hash-a:8": 5}
    assert cache_key(HashBackend(dim=4)) == "fake:hash-a:4"
    digests = [bytes(r[0]) for r in conn.execute("SELECT content_sha256 FROM ragstore.chunks").fetchall()]
    assert len(lookup(conn, "fake:hash-a:8", digests)) == 5 and lookup(conn, "fake:hash-a:4", digests) == {}


def test_embed_cached_embeds_a_repeated_text_once_and_returns_rows_in_order(conn: Any) -> None:
    backend = HashBackend(dim=2048)  # a halfvec-sized model: the cache keeps its float32 vectors
    texts = ["alpha", "beta", "alpha"]
    digests = [b"a" * 32, b"b" * 32, b"a" * 32]
    matrix, embedded = embed_cached(conn, backend, texts, digests)
    conn.commit()
    assert embedded == 2 and backend.calls == ["alpha", "beta"]
    assert np.array_equal(matrix, vectors_for("hash-a", 2048, texts))
    again, embedded_again = embed_cached(conn, backend, texts, digests)
    assert embedded_again == 0 and np.array_equal(again, matrix)
