"""A family serves exactly its own chunks: no command on one family changes or deletes what another serves.

Each test reproduces a way one family used to reach into another through the shared chunk table (text
rewritten, chunks pruned, vectors of another provider served from the embedding cache) and checks every
read path (hnsw, exact, fts, hybrid, the SQL functions) on both families.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pgvector import Vector

from ragstore import families
from ragstore.embed.offline import OfflineBackend
from ragstore.embed.offline import fingerprint as fingerprints
from ragstore.embed.openai import OpenAIBackend
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from ragstore.search.api import search
from ragstore.search.fts import fts_search
from tests.openai_stub import StubServer

A_TEXT = "apples grow on orchard trees in autumn"
B_TEXT = "bananas ripen yellow in tropical sunshine"


def fingerprint(text: str) -> np.ndarray:
    return fingerprints([text])[0]


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def index(conn: Any, name: str, path: Path, **kw: Any) -> Any:
    return index_sources(conn, name, open_sources([str(path)]), **kw)


def served(conn: Any, family: str) -> dict[str, tuple[str, str, np.ndarray]]:
    """What a family serves, by id: (package_path, text, vector), read through the search path (a zero
    query returns every row by chunk_id)."""
    fam = families.get_family(conn, family)
    hits = search(conn, family, vector=np.zeros(fam.dim, dtype=np.float32), k=1000, mode="hnsw")
    return {h.chunk_id: (h.package_path, h.text, np.asarray(h.vector)) for h in hits}


@pytest.fixture
def two(conn: Any) -> Any:
    families.create_family(conn, "alpha", OfflineBackend())
    families.create_family(conn, "beta", OfflineBackend())
    return conn


def test_indexing_b_with_an_id_a_holds_leaves_a_text_vector_and_full_text(two: Any, tmp_path: Path) -> None:
    conn = two
    index(conn, "alpha", write_jsonl(tmp_path / "a.jsonl", [{"chunk_id": "c1", "package_path": "p/x", "text": A_TEXT}]))
    index(conn, "beta", write_jsonl(tmp_path / "b.jsonl", [{"chunk_id": "c1", "package_path": "p/y", "text": B_TEXT}]))

    a, b = served(conn, "alpha"), served(conn, "beta")
    assert a["c1"][:2] == ("p/x", A_TEXT) and b["c1"][:2] == ("p/y", B_TEXT)
    assert np.allclose(a["c1"][2], fingerprint(A_TEXT)) and np.allclose(b["c1"][2], fingerprint(B_TEXT))

    assert [h.text for h in fts_search(conn, families.get_family(conn, "alpha"), "apples", k=5)] == [A_TEXT]
    assert fts_search(conn, families.get_family(conn, "alpha"), "bananas", k=5) == []
    assert [h.text for h in fts_search(conn, families.get_family(conn, "beta"), "bananas", k=5)] == [B_TEXT]
    assert fts_search(conn, families.get_family(conn, "beta"), "apples", k=5) == []


@pytest.mark.parametrize("mode", ["hnsw", "exact", "fts", "hybrid"])
def test_same_id_in_two_families_each_served_with_its_own_text_and_vector(two: Any, tmp_path: Path, mode: str) -> None:
    conn = two
    for name, text in (("alpha", A_TEXT), ("beta", B_TEXT)):
        rows = [{"chunk_id": "same", "package_path": "p", "text": text}]
        rows += [{"chunk_id": f"{name}{i}", "package_path": "p", "text": f"{name} filler {i}"} for i in range(5)]
        index(conn, name, write_jsonl(tmp_path / f"{name}.jsonl", rows))
    for name, text, word in (("alpha", A_TEXT, "orchard"), ("beta", B_TEXT, "tropical")):
        vector = fingerprint(text)
        query = word if mode in ("fts", "hybrid") else None
        # MMR to get each hit's vector back; the caller's own backend (MMR on an offline family's text query
        # is refused otherwise: its fingerprints carry no meaning to diversify by).
        hits = search(
            conn, name, query, vector=None if query else vector, k=10, mode=mode, rerank="mmr", fetch_k=10,
            backend=OfflineBackend(),
        )  # fmt: skip
        same = [h for h in hits if h.chunk_id == "same"]
        assert len(same) == 1, (name, mode, [h.chunk_id for h in hits])
        assert same[0].text == text
        assert same[0].vector is not None and np.allclose(same[0].vector, vector)
        assert all(h.chunk_id == "same" or h.chunk_id.startswith(name) for h in hits)


def test_sql_functions_serve_each_family_its_own_text(two: Any, tmp_path: Path) -> None:
    conn = two
    index(conn, "alpha", write_jsonl(tmp_path / "a.jsonl", [{"chunk_id": "c1", "package_path": "p", "text": A_TEXT}]))
    index(conn, "beta", write_jsonl(tmp_path / "b.jsonl", [{"chunk_id": "c1", "package_path": "p", "text": B_TEXT}]))
    for name, text in (("alpha", A_TEXT), ("beta", B_TEXT)):
        rows = conn.execute("SELECT chunk_id, text FROM ragstore.search(%s, %s, 5)", (name, Vector(fingerprint(text))))
        assert rows.fetchall() == [("c1", text)]
        rows = conn.execute("SELECT chunk_id, text FROM ragstore.search_text(%s, %s, 5)", (name, text))
        assert rows.fetchall() == [("c1", text)]
        word = text.split()[0]
        rows = conn.execute(
            "SELECT chunk_id, text, fts_rank FROM ragstore.hybrid_search(%s, %s, %s, 5)",
            (name, word, Vector(fingerprint(text))),
        )
        assert rows.fetchall() == [("c1", text, 1)]


def test_prune_on_b_never_deletes_a_chunks(two: Any, tmp_path: Path) -> None:
    conn = two
    a_rows = [{"chunk_id": f"a{i}", "package_path": "shared/pkg", "text": f"alpha text {i}"} for i in range(4)]
    index(conn, "alpha", write_jsonl(tmp_path / "a.jsonl", a_rows))
    before = served(conn, "alpha")
    b_rows = [{"chunk_id": "b0", "package_path": "shared/pkg", "text": "beta text"}]
    report = index(conn, "beta", write_jsonl(tmp_path / "b.jsonl", b_rows), prune=True)
    assert report.pruned == 0
    after = served(conn, "alpha")
    assert after.keys() == before.keys() and all(after[k][1] == before[k][1] for k in after)
    assert set(served(conn, "beta")) == {"b0"}


def test_folder_prune_on_b_never_deletes_a_chunks_under_the_same_prefix(two: Any, tmp_path: Path) -> None:
    conn = two
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "one.md").write_text("Alpha has its own document about orchards.\n")
    index(conn, "alpha", folder)
    alpha_ids = set(served(conn, "alpha"))
    (folder / "one.md").unlink()
    (folder / "two.md").write_text("Beta holds another document about bananas.\n")
    report = index(conn, "beta", folder, prune=True)
    assert report.pruned == 0
    assert set(served(conn, "alpha")) == alpha_ids
    # Pruning alpha itself removes what alpha's input no longer holds, and only from alpha.
    beta_ids = set(served(conn, "beta"))
    report = index(conn, "alpha", folder, prune=True)
    assert report.pruned == len(alpha_ids)
    assert set(served(conn, "beta")) == beta_ids


def test_a_moved_chunk_in_b_leaves_a_package_path(two: Any, tmp_path: Path) -> None:
    conn = two
    index(conn, "alpha", write_jsonl(tmp_path / "a.jsonl", [{"chunk_id": "c1", "package_path": "a/pkg", "text": "t"}]))
    index(conn, "beta", write_jsonl(tmp_path / "b.jsonl", [{"chunk_id": "c1", "package_path": "b/pkg", "text": "t"}]))
    index(conn, "beta", write_jsonl(tmp_path / "b2.jsonl", [{"chunk_id": "c1", "package_path": "b/new", "text": "t"}]))
    assert served(conn, "alpha")["c1"][0] == "a/pkg"
    assert [h.chunk_id for h in search(conn, "alpha", vector=fingerprint("t"), k=5, package="a/")] == ["c1"]
    assert search(conn, "alpha", vector=fingerprint("t"), k=5, package="b/") == []


def test_drop_deletes_the_family_chunks_and_nothing_else(two: Any, tmp_path: Path) -> None:
    conn = two
    for name in ("alpha", "beta"):
        rows = [{"chunk_id": f"c{i}", "package_path": "p", "text": f"{name} {i}"} for i in range(3)]
        index(conn, name, write_jsonl(tmp_path / f"{name}.jsonl", rows))
    families.drop_family(conn, "alpha")
    counts = dict(conn.execute("SELECT family, count(*) FROM ragstore.chunks GROUP BY family").fetchall())
    assert counts == {"beta": 3}
    assert {k: v[1] for k, v in served(conn, "beta").items()} == {f"c{i}": f"beta {i}" for i in range(3)}


def test_full_text_idf_counts_only_the_family_chunks(two: Any, tmp_path: Path) -> None:
    conn = two
    b_rows = [{"chunk_id": "b1", "package_path": "p", "text": "rare word zebra here"}]
    b_rows.append({"chunk_id": "b2", "package_path": "p", "text": "nothing of note"})
    index(conn, "beta", write_jsonl(tmp_path / "b.jsonl", b_rows))
    beta = families.get_family(conn, "beta")
    before = [(h.chunk_id, h.score) for h in fts_search(conn, beta, "zebra", k=5)]
    a_rows = [{"chunk_id": f"a{i}", "package_path": "p", "text": f"zebra number {i}"} for i in range(50)]
    index(conn, "alpha", write_jsonl(tmp_path / "a.jsonl", a_rows))
    after = [(h.chunk_id, h.score) for h in fts_search(conn, beta, "zebra", k=5)]
    assert after == before
    sql_fn = "SELECT chunk_id, fts_score FROM ragstore.hybrid_search('beta', 'zebra', %s, 5) WHERE fts_rank IS NOT NULL"
    # The CLI rounds BM25 to 12 decimals (equal scores tie the same way on one node and on Citus).
    from_sql = conn.execute(sql_fn, (Vector(fingerprint("zebra")),)).fetchall()
    assert [(cid, pytest.approx(score, abs=1e-9)) for cid, score in from_sql] == before


def test_a_row_whose_vector_is_not_the_embedding_of_the_text_is_never_served(two: Any, tmp_path: Path) -> None:
    """The read joins require the family row's content hash to equal the chunk's: a vector made for other
    text (a row written behind ragstore's back) is not served with this text."""
    conn = two
    rows = [{"chunk_id": f"c{i}", "package_path": "p", "text": f"orchard text {i}"} for i in range(3)]
    index(conn, "alpha", write_jsonl(tmp_path / "a.jsonl", rows))
    other = "orchard poisoned text"
    conn.execute(
        "UPDATE ragstore.chunks SET text = %s, content_sha256 = %s WHERE family = 'alpha' AND chunk_id = 'c0'",
        (other, hashlib.sha256(other.encode()).digest()),
    )
    conn.commit()
    for mode in ("hnsw", "exact", "fts", "hybrid"):
        text_mode = mode in ("fts", "hybrid")
        query, vector = ("orchard", None) if text_mode else (None, fingerprint("orchard text 0"))
        hits = search(conn, "alpha", query, vector=vector, k=10, mode=mode)
        assert "c0" not in {h.chunk_id for h in hits}, mode
    got = conn.execute("SELECT chunk_id FROM ragstore.search('alpha', %s, 10)", (Vector(fingerprint("x")),))
    assert "c0" not in {r[0] for r in got.fetchall()}
    # The next index run re-embeds it from its input.
    index(conn, "alpha", write_jsonl(tmp_path / "a.jsonl", rows))
    assert served(conn, "alpha")["c0"][1] == "orchard text 0"


def test_migrating_a_family_re_embeds_its_own_texts_and_leaves_the_other_family(two: Any, tmp_path: Path) -> None:
    from ragstore.families.migrate import migrate_family
    from tests.toolkit.family_migrate import HashBackend, vectors_for

    conn = two
    index(conn, "alpha", write_jsonl(tmp_path / "a.jsonl", [{"chunk_id": "c1", "package_path": "p", "text": A_TEXT}]))
    index(conn, "beta", write_jsonl(tmp_path / "b.jsonl", [{"chunk_id": "c1", "package_path": "p", "text": B_TEXT}]))
    beta_before = served(conn, "beta")
    target = HashBackend(model="hash-a", dim=8)
    report = migrate_family(conn, "alpha", target)
    assert report.swapped and target.calls == [A_TEXT]
    alpha = served(conn, "alpha")
    assert alpha["c1"][1] == A_TEXT and np.allclose(alpha["c1"][2], vectors_for("hash-a", 8, [A_TEXT])[0])
    beta = served(conn, "beta")
    assert beta.keys() == beta_before.keys() and beta["c1"][1] == B_TEXT
    assert np.array_equal(beta["c1"][2], beta_before["c1"][2])


def test_two_openai_families_on_two_endpoints_each_call_their_own_provider(conn: Any, tmp_path: Path) -> None:
    with StubServer(native_dim=8) as one, StubServer(native_dim=8) as two:
        backends = {}
        for name, stub in (("one", one), ("two", two)):
            backend = OpenAIBackend(base_url=stub.url, model="same-model", dim=8, api_key_env="NO_SUCH_KEY_VAR")
            families.create_family(conn, name, backend, options={"base_url": stub.url})
            backends[name] = backend
        src = write_jsonl(tmp_path / "c.jsonl", [{"chunk_id": "c1", "package_path": "p", "text": "one text"}])
        index(conn, "one", src, backend=backends["one"])
        calls_one = len(one.requests)
        index(conn, "two", src, backend=backends["two"])
        assert calls_one >= 1
        assert len(two.requests) >= 1, "family two was served family one's cached vector"
        keys = {r[0] for r in conn.execute("SELECT model FROM ragstore.embedding_cache").fetchall()}
        assert len(keys) == 2 and all("same-model" in k for k in keys)
        assert not any("NO_SUCH" in k for k in keys)


def test_cache_key_holds_the_endpoint_without_credentials() -> None:
    from ragstore.embed.cache import cache_key

    a = OpenAIBackend(base_url="https://user:secret@example.test/v1/", model="m", dim=4)
    b = OpenAIBackend(base_url="https://example.test/v1", model="m", dim=4)
    c = OpenAIBackend(base_url="https://other.test/v1", model="m", dim=4)
    assert "secret" not in cache_key(a) and "user" not in cache_key(a)
    assert cache_key(a) == cache_key(b) != cache_key(c)
    assert cache_key(OfflineBackend()) != cache_key(b)
