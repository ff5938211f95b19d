"""Delete, get, list and export a family's chunks: through Store and AsyncStore (the same tests), the CLI,
and as LOGIN members of the app and reader roles. Another family holding the same ids and packages is
never touched; the word counts (BM25) stay exact; an export indexes back to the same content."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from click.testing import CliRunner
from psycopg.conninfo import make_conninfo

from ragstore import AsyncStore, Store
from ragstore.cli.main import cli
from ragstore.errors import InvalidInput, NotFound, RagstoreError
from tests.toolkit.bm25 import document_frequencies_are_current, postings_are_current
from tests.toolkit.chunks import records
from tests.toolkit.roles import _login_role
from tests.toolkit.store import AsyncAsSync, LoopThread


@pytest.fixture(params=["sync", "async"])
def store(request: pytest.FixtureRequest, dsn: str) -> Iterator[Any]:
    """A Store, or an AsyncStore driven from a loop thread (the same tests for both)."""
    if request.param == "sync":
        with Store(dsn, pool_size=4) as opened:
            yield opened
        return
    loop = LoopThread()
    astore = AsyncStore(dsn, pool_size=4)
    loop.run(astore.open())
    try:
        yield AsyncAsSync(astore, loop)
    finally:
        loop.run(astore.close())
        loop.stop()


@pytest.fixture
def app_dsn(dsn: str) -> Iterator[str]:
    for name in _login_role(dsn, "ragstore_app"):
        yield make_conninfo(dsn, user=name)


@pytest.fixture
def reader_dsn(dsn: str) -> Iterator[str]:
    for name in _login_role(dsn, "ragstore_reader"):
        yield make_conninfo(dsn, user=name)


def two_families(store: Any) -> None:
    """``docs`` and ``other`` holding the same chunks (ids, packages, texts)."""
    store.create_family("docs", "offline")
    store.create_family("other", "offline")
    store.index(records(), "docs")
    store.index(records(), "other")


def content(dsn: str, family: str) -> list[tuple[Any, ...]]:
    """A family's content: per chunk its id, package, text, metadata and both hashes, in id order."""
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT chunk_id, package_path, text, metadata::text, content_sha256, record_sha256 "
            "FROM ragstore.chunks WHERE family = %s ORDER BY chunk_id",
            (family,),
        ).fetchall()


def counts_are_exact(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        postings_are_current(conn)
        document_frequencies_are_current(conn)


# -- delete --------------------------------------------------------------------------------------------


def test_delete_by_id_and_prefix_touches_only_its_family_and_keeps_the_counts_exact(store: Any, dsn: str) -> None:
    two_families(store)
    before_other = content(dsn, "other")
    report = store.delete("docs", ids=["c01", "nope"], packages=["guide_x/"])
    # guide_x/ holds c02, c06, ... (6 chunks); c01 is in guide/b.md
    assert (report.chunks, report.packages, report.missing) == (7, {"guide_x/c.md": 6, "guide/b.md": 1}, ["nope"])
    assert report.summary() == "docs: deleted 7 chunks in 2 packages; 1 of the ids given not found"
    left = {row[0] for row in content(dsn, "docs")}
    assert "c01" not in left and len(left) == 17
    assert content(dsn, "other") == before_other
    assert store.family_stats("docs").rows == 17
    counts_are_exact(dsn)


def test_a_package_prefix_takes_its_wildcards_literally(store: Any, dsn: str) -> None:
    two_families(store)
    # "guide_" is a prefix of guide_x/ only: its "_" does not match the "/" of guide/a.md
    report = store.delete("docs", packages=["guide_"])
    assert set(report.packages) == {"guide_x/c.md"}
    assert {row[1] for row in content(dsn, "docs")} == {"guide/a.md", "guide/b.md", "ref/d.md"}


def test_a_dry_run_says_what_would_go_and_deletes_nothing(store: Any, dsn: str) -> None:
    two_families(store)
    before = content(dsn, "docs")
    report = store.delete("docs", packages=["guide/"], dry_run=True)
    assert report.dry_run and report.chunks == 12
    assert report.packages == {"guide/a.md": 6, "guide/b.md": 6}
    assert report.summary() == "docs: would delete 12 chunks in 2 packages"
    assert content(dsn, "docs") == before


def test_ids_and_prefixes_together_count_each_chunk_once_in_the_dry_run_and_the_delete(store: Any) -> None:
    two_families(store)
    # c00 and c04 are in guide/a.md, under the prefix too; c03 is in ref/d.md
    what = {"ids": ["c00", "c04", "c03"], "packages": ["guide/a.md", "guide/"]}
    dry = store.delete("docs", dry_run=True, **what)
    assert (dry.chunks, dry.packages) == (13, {"guide/a.md": 6, "guide/b.md": 6, "ref/d.md": 1})
    done = store.delete("docs", **what)
    assert (done.chunks, done.packages, done.missing) == (dry.chunks, dry.packages, [])
    assert store.family_stats("docs").rows == 24 - 13


def test_delete_refuses_a_call_with_nothing_to_match_and_an_unknown_family(store: Any) -> None:
    two_families(store)
    with pytest.raises(InvalidInput, match="say what to delete"):
        store.delete("docs")
    with pytest.raises(InvalidInput, match="non-blank"):
        store.delete("docs", packages=[""])
    with pytest.raises(NotFound):
        store.delete("nosuch", ids=["c01"])
    assert store.family_stats("docs").rows == 24


# -- get and list --------------------------------------------------------------------------------------


def test_get_returns_the_chunks_in_the_order_given_and_names_the_missing(store: Any) -> None:
    two_families(store)
    store.delete("other", ids=["c03"])
    got = store.get("other", ["c05", "c03", "c00", "c05"])
    assert [c.chunk_id for c in got.chunks] == ["c05", "c00"]
    assert got.missing == ["c03"]
    first = got.chunks[0]
    assert (first.package_path, first.metadata["n"], first.vector) == ("guide/b.md", 5, None)
    assert first.text == records()[5]["text"]
    with_vectors = store.get("docs", ["c03"], vectors=True).chunks[0]
    assert with_vectors.vector is not None and with_vectors.vector.dtype == np.float32
    assert with_vectors.vector.shape == (store.family("docs").dim,) and with_vectors.model
    with pytest.raises(InvalidInput, match="at least one"):
        store.get("docs", [])
    with pytest.raises(NotFound):
        store.get("nosuch", ["c01"])


def test_list_pages_through_every_chunk_in_a_stable_order_with_the_counts(store: Any) -> None:
    two_families(store)
    seen: list[tuple[str, str]] = []
    after = None
    while True:
        page = store.list_chunks("docs", package="guide", limit=5, after=after)
        assert (page.total, page.packages) == (18, 3)
        seen += [(c.package_path, c.chunk_id) for c in page.chunks]
        after = page.next
        if after is None:
            break
    assert seen == sorted(seen) and len(seen) == len(set(seen)) == 18
    everything = store.list_chunks("docs", limit=100)
    assert everything.total == 24 and everything.next is None and len(everything.chunks) == 24
    with pytest.raises(NotFound, match="no chunk 'zz'"):
        store.list_chunks("docs", after="zz")
    with pytest.raises(InvalidInput, match="limit"):
        store.list_chunks("docs", limit=0)


# -- export --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("format", ["jsonl", "parquet"])
def test_an_export_indexes_back_into_a_new_family_to_the_same_content(
    store: Any, dsn: str, tmp_path: Path, format: str
) -> None:
    if format == "parquet":
        pytest.importorskip("pyarrow")
    two_families(store)
    path = tmp_path / f"docs.{format}"
    report = store.export("docs", path, format=format)
    assert (report.chunks, report.path) == (24, str(path))
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # the temporary file was renamed
    store.create_family("copy", "offline")
    indexed = store.index_files([path], "copy")
    assert indexed.inserted == 24
    assert content(dsn, "copy") == content(dsn, "docs")


def test_an_export_with_vectors_gives_an_external_family_the_same_vector_bytes(
    store: Any, dsn: str, tmp_path: Path
) -> None:
    pytest.importorskip("pyarrow")
    rng = np.random.default_rng(7)
    store.create_family("ext", "external", model="mine-8", options={"dimensions": 8})
    rows = [r | {"vector": rng.standard_normal(8).astype(np.float32).tolist()} for r in records()]
    store.index(rows, "ext")
    for format in ("jsonl", "parquet"):
        path = tmp_path / f"ext.{format}"
        store.export("ext", path, format=format, vectors=True)
        name = f"ext_{format}"
        store.create_family(name, "external", model="mine-8", options={"dimensions": 8})
        assert store.index_files([path], name).inserted == 24
        assert content(dsn, name) == content(dsn, "ext")
        with psycopg.connect(dsn) as conn:
            vectors = [
                conn.execute(
                    f"SELECT chunk_id, embedding::text, model FROM ragstore.emb_{table} ORDER BY chunk_id"
                ).fetchall()
                for table in ("ext", name)
            ]
        assert vectors[0] == vectors[1]
        source = store.get("ext", ["c07"], vectors=True).chunks[0].vector
        copied = store.get(name, ["c07"], vectors=True).chunks[0].vector
        assert source.tobytes() == copied.tobytes()


def test_an_export_of_a_prefix_to_a_stream_holds_only_that_prefix(store: Any) -> None:
    two_families(store)
    out = io.BytesIO()
    report = store.export("docs", out, package="ref/")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert report.chunks == len(lines) == 6 and {line["package_path"] for line in lines} == {"ref/d.md"}
    assert set(lines[0]) == {"chunk_id", "package_path", "text", "metadata"}
    with pytest.raises(InvalidInput, match="format"):
        store.export("docs", out, format="csv")


def test_an_export_that_cannot_be_written_says_so_and_leaves_no_file(store: Any, tmp_path: Path) -> None:
    two_families(store)
    with pytest.raises(InvalidInput, match="cannot write"):
        store.export("docs", tmp_path / "no" / "such" / "dir.jsonl")
    assert list(tmp_path.iterdir()) == []


# -- the CLI -------------------------------------------------------------------------------------------


def run(dsn: str, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--dsn", dsn, *args])


@pytest.fixture
def indexed(dsn: str) -> str:
    with Store(dsn, pool_size=2) as opened:
        two_families(opened)
    return dsn


def test_cli_delete_prints_one_line_and_refuses_neither_ids_nor_packages(indexed: str) -> None:
    refused = run(indexed, "delete", "docs")
    assert refused.exit_code == 1 and "--id ID or --package PREFIX" in refused.output
    dry = run(indexed, "delete", "docs", "--package", "guide/", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert dry.output.splitlines() == [
        "docs: would delete 12 chunks in 2 packages",
        "  guide/a.md: 6",
        "  guide/b.md: 6",
    ]
    done = run(indexed, "delete", "docs", "--package", "guide/", "--id", "c03")
    assert done.exit_code == 0 and done.output == "docs: deleted 13 chunks in 3 packages\n"
    data = json.loads(run(indexed, "delete", "docs", "--id", "c03", "--json").output)
    assert (data["chunks"], data["missing"], data["dry_run"]) == (0, ["c03"], False)
    counts_are_exact(indexed)


def test_cli_get_prints_the_found_and_exits_1_naming_the_missing(indexed: str) -> None:
    result = CliRunner().invoke(cli, ["--dsn", indexed, "get", "docs", "c00", "zz", "--json", "--vectors"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["missing"] == ["zz"] and [c["chunk_id"] for c in data["chunks"]] == ["c00"]
    with Store(indexed, pool_size=1) as opened:
        assert len(data["chunks"][0]["vector"]) == opened.family("docs").dim
    text = run(indexed, "get", "docs", "c00")
    assert text.exit_code == 0
    assert text.output.splitlines()[:3] == [
        "[guide/a.md#c00]",
        'metadata: {"lang": "fr", "n": 0, "x": 0.0}',
        records()[0]["text"],
    ]


@pytest.mark.slow
def test_cli_list_and_export_round_trip(indexed: str, tmp_path: Path) -> None:
    page = json.loads(run(indexed, "list", "docs", "--package", "ref/", "--limit", "4", "--json").output)
    assert (page["total"], page["packages"], len(page["chunks"])) == (6, 1, 4) and page["next"] == "c15"
    rest = json.loads(run(indexed, "list", "docs", "--package", "ref/", "--after", "c15", "--json").output)
    assert [c["chunk_id"] for c in rest["chunks"]] == ["c19", "c23"] and rest["next"] is None
    text = run(indexed, "list", "docs", "--package", "ref/", "--after", "c15")
    rows = [line.split("\t") for line in text.stdout.splitlines()]  # a real tab, not the two characters \t
    assert [(r[0].startswith("ref/"), r[1]) for r in rows] == [(True, "c19"), (True, "c23")], text.output
    target = tmp_path / "docs.jsonl"
    exported = run(indexed, "export", "docs", "--output", str(target), "--json")
    assert exported.exit_code == 0, exported.output
    assert json.loads(exported.output)["chunks"] == 24
    assert run(indexed, "family", "create", "copy").exit_code == 0
    assert json.loads(run(indexed, "index", "copy", str(target), "--json").output)["inserted"] == 24
    assert content(indexed, "copy") == content(indexed, "docs")


def test_cli_export_writes_jsonl_to_stdout_and_says_in_one_line_when_parquet_needs_pyarrow(
    indexed: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = run(indexed, "export", "docs", "--package", "guide_x/")
    assert out.exit_code == 0, out.output
    lines = [json.loads(line) for line in out.output.splitlines()]
    assert [line["chunk_id"] for line in lines] == ["c02", "c06", "c10", "c14", "c18", "c22"]
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if the parquet extra were not installed
    target = tmp_path / "docs.parquet"
    missing = run(indexed, "export", "docs", "--format", "parquet", "--output", str(target))
    assert missing.exit_code == 1
    assert missing.output == "error: writing Parquet needs pyarrow: pip install 'ragstore[parquet]'\n"
    assert not target.exists()


# -- roles ---------------------------------------------------------------------------------------------


def test_the_app_role_deletes_and_the_reader_role_gets_lists_and_exports_but_cannot_delete(
    indexed: str,
    app_dsn: str,
    reader_dsn: str,
    tmp_path: Path,
) -> None:
    refused = run(reader_dsn, "delete", "docs", "--id", "c00")
    assert refused.exit_code == 1 and "permission denied" in refused.output
    assert "Traceback" not in refused.output and len(refused.output.strip().splitlines()) == 1
    with Store(reader_dsn, pool_size=1) as as_reader:
        with pytest.raises(RagstoreError, match="permission denied"):
            as_reader.delete("docs", packages=["guide/"])
        assert as_reader.get("docs", ["c00"], vectors=True).chunks[0].vector is not None
        assert as_reader.list_chunks("docs").total == 24
        assert as_reader.export("docs", tmp_path / "r.jsonl").chunks == 24
    assert len(content(indexed, "docs")) == 24
    done = run(app_dsn, "delete", "docs", "--package", "ref/", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["chunks"] == 6
    assert len(content(indexed, "docs")) == 18 and len(content(indexed, "other")) == 24
    counts_are_exact(indexed)
