"""Folder documents are named so that two folders never share ids: two roots both called ``docs`` can
neither overwrite nor prune each other's chunks, through the CLI and through ``Store.index_files``; the
source registry says which root wrote each prefix and is visible in ``family show``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from psycopg.conninfo import make_conninfo

from ragstore import Store, families
from ragstore.cli.main import cli
from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import Conflict, InvalidInput
from tests.ids import doc
from tests.toolkit.roles import _login_role


@pytest.fixture
def family(conn: Any) -> Any:
    return families.create_family(conn, "docs", OfflineBackend())


def two_roots(tmp_path: Path) -> tuple[Path, Path]:
    """Two projects, each with a ``docs`` folder: A has README.md and LICENSE.md, B a README.md only."""
    a = tmp_path / "projA" / "docs"
    b = tmp_path / "projB" / "docs"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    (a / "README.md").write_text("# Project A\n\nA's readme about apples")
    (a / "LICENSE.md").write_text("A's licence text")
    (b / "README.md").write_text("# Project B\n\nB's readme about bananas")
    return a, b


def stored(conn: Any) -> dict[str, str]:
    rows = conn.execute("SELECT chunk_id, text FROM ragstore.chunks ORDER BY chunk_id").fetchall()
    return {doc(str(chunk_id)): str(text) for chunk_id, text in rows}


def test_a_second_folder_of_the_same_name_is_refused_before_anything_is_written(
    dsn: str, conn: Any, family: Any, tmp_path: Path
) -> None:
    a, b = two_roots(tmp_path)
    runner = CliRunner()
    first = runner.invoke(cli, ["--dsn", dsn, "index", "docs", str(a), "--prune"])
    assert first.exit_code == 0, first.output
    before = stored(conn)
    assert set(before) == {"docs/LICENSE.md#", "docs/README.md#"}
    refused = runner.invoke(cli, ["--dsn", dsn, "index", "docs", str(b), "--prune"])
    assert refused.exit_code == 1, refused.output
    lines = refused.output.strip().splitlines()
    assert len(lines) == 1, lines
    assert str(a.resolve()) in lines[0] and str(b.resolve()) in lines[0]
    assert "--as" in lines[0] and "--replace-root" in lines[0]
    assert stored(conn) == before  # A's README kept, A's LICENSE not pruned


def test_as_names_the_second_folder_apart_and_prune_touches_only_its_own_prefix(
    dsn: str, conn: Any, family: Any, tmp_path: Path
) -> None:
    a, b = two_roots(tmp_path)
    runner = CliRunner()
    assert runner.invoke(cli, ["--dsn", dsn, "index", "docs", str(a)]).exit_code == 0
    done = runner.invoke(cli, ["--dsn", dsn, "index", "docs", str(b), "--as", "projb", "--prune", "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert report["inserted"] == 1 and report["pruned"] == 0
    assert report["sources"] == [
        {"prefix": "projb", "root": str(b.resolve()), "host": report["sources"][0]["host"], "registered": "new"}
    ]
    assert set(stored(conn)) == {"docs/LICENSE.md#", "docs/README.md#", "projb/README.md#"}
    # a rerun of A with --prune after deleting its LICENSE prunes A's file only
    (a / "LICENSE.md").unlink()
    again = runner.invoke(cli, ["--dsn", dsn, "index", "docs", str(a), "--prune", "--json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.output)["pruned"] == 1
    assert json.loads(again.output)["sources"][0]["registered"] == "same"
    assert set(stored(conn)) == {"docs/README.md#", "projb/README.md#"}


def test_replace_root_takes_the_prefix_over_and_family_show_lists_the_sources(
    dsn: str, conn: Any, family: Any, tmp_path: Path
) -> None:
    a, b = two_roots(tmp_path)
    runner = CliRunner()
    assert runner.invoke(cli, ["--dsn", dsn, "index", "docs", str(a)]).exit_code == 0
    done = runner.invoke(cli, ["--dsn", dsn, "index", "docs", str(b), "--replace-root", "--prune", "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    # B's README is another text: a new id; A's README and LICENSE pruned
    assert (report["inserted"], report["updated"], report["pruned"]) == (1, 0, 2)
    assert report["sources"][0]["registered"] == "replaced"
    assert stored(conn) == {"docs/README.md#": "# Project B\n\nB's readme about bananas"}
    shown = runner.invoke(cli, ["--dsn", dsn, "family", "show", "docs", "--json"])
    assert shown.exit_code == 0, shown.output
    sources = json.loads(shown.output)["sources"]
    assert [(s["prefix"], s["root"]) for s in sources] == [("docs", str(b.resolve()))]
    text = runner.invoke(cli, ["--dsn", dsn, "family", "show", "docs"])
    assert f"docs/ <- {b.resolve()}" in text.output
    # and now A is the other root
    refused = runner.invoke(cli, ["--dsn", dsn, "index", "docs", str(a)])
    assert refused.exit_code == 1 and str(b.resolve()) in refused.output


def test_a_single_document_follows_its_folders_rule(dsn: str, conn: Any, family: Any, tmp_path: Path) -> None:
    a, b = two_roots(tmp_path)
    runner = CliRunner()
    assert runner.invoke(cli, ["--dsn", dsn, "index", "docs", str(a / "README.md")]).exit_code == 0
    refused = runner.invoke(cli, ["--dsn", dsn, "index", "docs", str(b / "README.md")])
    assert refused.exit_code == 1, refused.output
    assert stored(conn)["docs/README.md#"].startswith("# Project A")
    # the folder that holds the document is the same root: accepted
    assert runner.invoke(cli, ["--dsn", dsn, "index", "docs", str(a)]).exit_code == 0


def test_two_roots_of_one_name_in_one_run_are_refused(dsn: str, conn: Any, family: Any, tmp_path: Path) -> None:
    a, b = two_roots(tmp_path)
    refused = CliRunner().invoke(cli, ["--dsn", dsn, "index", "docs", str(a), str(b)])
    assert refused.exit_code == 1, refused.output
    assert "--as" in refused.output
    assert stored(conn) == {}


@pytest.mark.parametrize("name", ["", "a/b", ".", "..", " x"])
def test_as_refuses_a_name_that_is_not_one_path_segment(dsn: str, family: Any, tmp_path: Path, name: str) -> None:
    a, _ = two_roots(tmp_path)
    refused = CliRunner().invoke(cli, ["--dsn", dsn, "index", "docs", str(a), "--as", name])
    assert refused.exit_code == 1 and "--as" in refused.output, refused.output


def test_store_index_files_holds_the_same_guarantee(dsn: str, conn: Any, family: Any, tmp_path: Path) -> None:
    a, b = two_roots(tmp_path)
    with Store(dsn, pool_size=2) as store:
        store.index_files([a], "docs", prune=True)
        before = stored(conn)
        with pytest.raises(Conflict, match="replace_root"):
            store.index_files([b], "docs", prune=True)
        assert stored(conn) == before
        report = store.index_files([b], "docs", prune=True, as_="projb")
        assert report.inserted == 1 and report.pruned == 0
        assert [(s.prefix, s.root) for s in store.sources("docs")] == [
            ("docs", str(a.resolve())),
            ("projb", str(b.resolve())),
        ]
        with pytest.raises(InvalidInput, match="as_"):
            store.index_files([b], "docs", as_="x/y")
        taken = store.index_files([b], "docs", prune=True, replace_root=True)
        assert (taken.inserted, taken.updated, taken.pruned) == (1, 0, 2)  # a new text: a new id
    assert set(stored(conn)) == {"docs/README.md#", "projb/README.md#"}


def test_the_app_role_registers_its_roots_and_the_reader_reads_them_but_writes_none(
    dsn: str, conn: Any, family: Any, tmp_path: Path
) -> None:
    a, b = two_roots(tmp_path)
    for app in _login_role(dsn, "ragstore_app"):
        app_dsn = make_conninfo(dsn, user=app)
        done = CliRunner().invoke(cli, ["--dsn", app_dsn, "index", "docs", str(a), "--json"])
        assert done.exit_code == 0, done.output
        assert json.loads(done.output)["sources"][0]["registered"] == "new"
        refused = CliRunner().invoke(cli, ["--dsn", app_dsn, "index", "docs", str(b)])
        assert refused.exit_code == 1 and "--replace-root" in refused.output
        taken = CliRunner().invoke(cli, ["--dsn", app_dsn, "index", "docs", str(b), "--replace-root"])
        assert taken.exit_code == 0, taken.output
        with connect(app_dsn) as own, pytest.raises(psycopg.errors.InsufficientPrivilege):
            own.execute("DELETE FROM ragstore.family_sources")
    for reader in _login_role(dsn, "ragstore_reader"):
        reader_dsn = make_conninfo(dsn, user=reader)
        with Store(reader_dsn, pool_size=1) as store:
            assert [(s.prefix, s.root) for s in store.sources("docs")] == [("docs", str(b.resolve()))]
        with connect(reader_dsn) as own, pytest.raises(psycopg.errors.InsufficientPrivilege):
            own.execute("UPDATE ragstore.family_sources SET root = '/elsewhere'")
        refused = CliRunner().invoke(cli, ["--dsn", reader_dsn, "index", "docs", str(a), "--as", "mine"])
        assert refused.exit_code == 1, refused.output
    assert [tuple(r) for r in conn.execute("SELECT prefix, root FROM ragstore.family_sources").fetchall()] == [
        ("docs", str(b.resolve()))
    ]


def test_of_two_roots_claiming_one_prefix_at_once_the_second_is_refused(dsn: str, family: Any, tmp_path: Path) -> None:
    """Root A's claim is in flight (its row inserted, not committed) when root B claims: B waits for A, or
    comes after it, and is refused either way; A's claim stands."""
    from concurrent.futures import ThreadPoolExecutor

    from ragstore.db.sqlfiles import query
    from ragstore.ingest import roots

    a, b = two_roots(tmp_path)
    mine, theirs = roots.Root("docs", str(a), "h"), roots.Root("docs", str(b), "h")
    params = {"family": "docs", "prefixes": ["docs"], "roots": [mine.root], "hosts": [mine.host]}
    with connect(dsn) as first, connect(dsn) as second, ThreadPoolExecutor(1) as pool:
        first.execute(query("sources", "register_new"), params)
        racing = pool.submit(roots.claim, second, "docs", [theirs])
        first.commit()
        with pytest.raises(Conflict, match=str(a)):
            racing.result(timeout=60)
        assert roots.list_sources(first, "docs")[0].root == str(a)


def test_async_store_index_files_refuses_another_root_and_takes_name(
    dsn: str, conn: Any, family: Any, tmp_path: Path
) -> None:
    import asyncio

    from ragstore import AsyncStore

    a, b = two_roots(tmp_path)

    async def scenario() -> list[tuple[str, str]]:
        async with AsyncStore(dsn, pool_size=2) as store:
            await store.index_files([a], "docs", prune=True)
            with pytest.raises(Conflict, match="--replace-root"):
                await store.index_files([b], "docs", prune=True)
            report = await store.index_files([b], "docs", prune=True, name="projb")
            assert report.sources[0]["prefix"] == "projb"
            return [(s.prefix, s.root) for s in await store.sources("docs")]

    assert asyncio.run(scenario()) == [("docs", str(a.resolve())), ("projb", str(b.resolve()))]
    assert set(stored(conn)) == {"docs/LICENSE.md#", "docs/README.md#", "projb/README.md#"}
