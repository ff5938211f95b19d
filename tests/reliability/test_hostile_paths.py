"""Hostile file trees and inputs: symlink loops, links leaving the folder, FIFOs, paths too long for a
chunk id, a stdin spool left by kill -9. Each gets a clear one-line outcome naming the path; nothing hangs,
nothing outside the folder is read, and a rejected run leaves the store as it was."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragstore import families
from ragstore.cli.main import cli
from ragstore.db.connection import connect
from ragstore.embed.offline import OfflineBackend
from ragstore.errors import InvalidInput
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources, skipped_files
from tests.ids import doc
from tests.reliability.helpers import RAGSTORE, chunk, cli_env, run_cli, table_hashes

pytestmark = pytest.mark.reliability


@pytest.fixture
def store(dsn: str) -> str:
    with connect(dsn) as conn:
        families.create_family(conn, "docs", OfflineBackend())
    return dsn


def _chunk_ids(dsn: str) -> list[str]:
    with connect(dsn) as conn:
        return sorted(doc(str(r[0])) for r in conn.execute("SELECT chunk_id FROM ragstore.chunks").fetchall())


def _hostile_tree(tmp_path: Path) -> tuple[Path, Path]:
    """A folder ``docs`` with one good document and every kind of entry the walk must not read."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("the secret outside the folder")
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "good.md").write_text("a good document about keys")
    (docs / "sub" / "inner.txt").write_text("an inner document")
    os.symlink(docs / "good.md", docs / "alias.md")  # a link inside the folder: read
    os.symlink(outside / "secret.txt", docs / "leak.txt")  # leaves the folder: skipped
    os.symlink(docs / "loop_b.txt", docs / "loop_a.txt")  # a loop: skipped
    os.symlink(docs / "loop_a.txt", docs / "loop_b.txt")
    os.symlink(docs / "nowhere.txt", docs / "broken.txt")  # broken: skipped
    os.symlink(docs, docs / "sub" / "again")  # a link to a folder (a cycle if followed): not followed
    os.symlink(outside, docs / "outside_dir")
    os.mkfifo(docs / "fifo.txt")  # opening it would block forever: skipped
    return docs, outside


def test_a_hostile_folder_indexes_its_documents_and_reports_every_other_entry(store: str, tmp_path: Path) -> None:
    docs, _ = _hostile_tree(tmp_path)
    result = run_cli(["--dsn", store, "index", "docs", str(docs), "--json", "--no-progress"], timeout=60)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    reasons = {Path(item["path"]).name: item["reason"] for item in report["skipped_files"]}
    assert reasons == {
        "leak.txt": "symbolic link leaving the folder",
        "loop_a.txt": "symbolic link loop",
        "loop_b.txt": "symbolic link loop",
        "broken.txt": "broken symbolic link",
        "fifo.txt": "a FIFO",
        "again": "symbolic link to a folder (not followed)",
        "outside_dir": "symbolic link to a folder (not followed)",
    }
    assert _chunk_ids(store) == ["docs/alias.md#", "docs/good.md#", "docs/sub/inner.txt#"]
    with connect(store) as conn:
        texts = [r[0] for r in conn.execute("SELECT text FROM ragstore.chunks").fetchall()]
    assert not any("secret" in text for text in texts)


def test_a_fifo_or_device_named_on_the_command_line_is_refused_not_opened(store: str, tmp_path: Path) -> None:
    fifo = tmp_path / "stream.jsonl"
    os.mkfifo(fifo)
    for target in (fifo, Path("/dev/zero")):
        result = run_cli(["--dsn", store, "index", "docs", str(target)], timeout=60)
        assert result.returncode == 1, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {target}: not a regular file"), result.stderr


def test_a_path_too_long_for_a_chunk_id_names_the_file_and_writes_nothing(store: str, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    deep = docs
    for i in range(6):  # 6 x 200 characters: a path of over 1,200 characters under the folder
        deep = deep / (f"{i}" * 200)
    deep.mkdir(parents=True)
    (docs / "short.md").write_text("a short path")
    (deep / "long.md").write_text("a long path")
    before = table_hashes(store)
    result = run_cli(["--dsn", store, "index", "docs", str(docs), "--no-progress"], timeout=60)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {deep / 'long.md'}: cannot index this document"), lines
    assert "chunk_id" in lines[0] and "internal error" not in lines[0]
    assert table_hashes(store) == before
    # --skip-bad-files indexes the rest and names the file it left out
    result = run_cli(["--dsn", store, "index", "docs", str(docs), "--skip-bad-files", "--json"], timeout=60)
    assert result.returncode == 0, result.stderr
    skipped = json.loads(result.stdout)["skipped_files"]
    assert [item["path"] for item in skipped] == [str(deep / "long.md")]
    assert _chunk_ids(store) == ["docs/short.md#"]


def test_context_pack_repo_map_skips_links_leaving_the_repo_fifos_and_loops(tmp_path: Path) -> None:
    docs, _ = _hostile_tree(tmp_path)
    result = subprocess.run(
        [RAGSTORE, "context-pack", "--brief", "b", "--repo", str(docs), "--budget", "100000"],
        capture_output=True,
        text=True,
        timeout=60,
        env=cli_env(),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    repo_map = json.loads(result.stdout)["layers"]["L1"]
    assert repo_map == ["alias.md", "good.md", "sub/inner.txt"], repo_map


def test_context_pack_refuses_a_fifo_as_file_or_state_and_verify_does_not_open_it(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.md").write_text("alpha\n")
    pack = tmp_path / "pack.json"
    built = run_cli(["context-pack", "--brief", "b", "--repo", str(repo), "--file", str(repo / "a.md"),
                     "--budget", "100000", "--out", str(pack)], timeout=60)  # fmt: skip
    assert built.returncode == 0, built.stderr
    (repo / "a.md").unlink()
    os.mkfifo(repo / "a.md")
    verified = run_cli(["context-pack", "--verify", str(pack), "--repo", str(repo)], timeout=60)
    assert verified.returncode == 1, verified.stderr
    assert "changed: a.md" in verified.stdout.splitlines(), verified.stdout
    for option in ("--file", "--state"):
        result = run_cli(["context-pack", "--brief", "b", "--repo", str(repo), option, str(repo / "a.md"),
                          "--budget", "100000"], timeout=60)  # fmt: skip
        assert result.returncode == 1, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "not a regular file" in lines[0], (option, result.stderr)


def test_a_state_file_nested_5000_deep_is_one_clear_line(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text('{"a": ' + "[" * 5000 + "]" * 5000 + "}")
    result = run_cli(["context-pack", "--brief", "b", "--state", str(state), "--budget", "100000"], timeout=60)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {state}: JSON nested 5001 levels deep"), lines


def test_kill9_of_index_stdin_leaves_no_spool_after_the_next_run(store: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = cli_env(RAGSTORE_HOME=str(home), TMPDIR=str(tmp))
    proc = subprocess.Popen(
        [RAGSTORE, "--dsn", store, "index", "docs", "-", "--no-progress"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdin is not None
    line = (json.dumps(chunk(1)) + "\n").encode()
    proc.stdin.write(line * 2000)
    proc.stdin.flush()

    def spools() -> list[Path]:
        return [p for p in [*tmp.rglob("*"), *home.rglob("*")] if p.is_file() and "stdin" in p.name]

    deadline = time.monotonic() + 60
    while not spools() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert spools(), "the indexer never spooled its input"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdin.close()
    left = spools()
    assert left, "kill -9 left nothing to clean: the scenario did not happen"
    for path in left:  # what a kill leaves is private to the user and inside the home
        assert path.is_relative_to(home), path
        assert (path.stat().st_mode & 0o077) == 0 and (path.parent.stat().st_mode & 0o777) == 0o700

    again = subprocess.run(
        [RAGSTORE, "--dsn", store, "index", "docs", "-", "--no-progress"],
        input=line,
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert again.returncode == 0, again.stderr
    assert spools() == []
    assert _chunk_ids(store) == [chunk(1)["chunk_id"]]


def test_library_skip_bad_files_reports_and_an_empty_document_counts_as_skipped(store: str, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("good text")
    (docs / "bad.md").write_bytes(b"ok\n\xff\xfe broken")
    (docs / "empty.txt").write_text("")
    (docs / "blank.md").write_text("  \n\t\n")
    before = table_hashes(store)
    with connect(store) as conn, pytest.raises(InvalidInput) as caught:
        index_sources(conn, "docs", open_sources([str(docs)]))
    assert str(caught.value).startswith(f"{docs / 'bad.md'}:2: invalid UTF-8 at byte 3")
    assert table_hashes(store) == before
    sources = open_sources([str(docs)], skip_bad_files=True)
    with connect(store) as conn:
        report = index_sources(conn, "docs", sources)
    assert report.inserted == 1 and report.skipped == 2
    assert sorted((Path(s.path).name, s.reason) for s in skipped_files(sources)) == [
        ("bad.md", "invalid UTF-8 at byte 3"),
        ("blank.md", "empty or whitespace-only document"),
        ("empty.txt", "empty or whitespace-only document"),
    ]


def test_cli_skip_bad_files_lists_what_it_skipped(store: str, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("good text")
    (docs / "bin.txt").write_bytes(b"a\x00b")
    runner = CliRunner()
    refused = runner.invoke(cli, ["--dsn", store, "index", "docs", str(docs)])
    assert refused.exit_code == 1
    assert refused.output.strip() == (
        f"error: {docs / 'bin.txt'}: contains NUL bytes (a binary file?) (--skip-bad-files indexes the other files)"
    )
    done = runner.invoke(cli, ["--dsn", store, "index", "docs", str(docs), "--skip-bad-files"])
    assert done.exit_code == 0, done.output
    lines = done.output.strip().splitlines()
    assert lines[0].startswith("docs: 1 inserted")
    assert lines[1:] == [f"skipped {docs / 'bin.txt'}: contains NUL bytes (a binary file?)"]


def test_a_single_document_is_chunked_like_in_its_folder_and_other_extensions_are_refused(
    store: str, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "one.md").write_text("# one\n\nfirst document")
    (docs / "two.txt").write_text("second document")
    (docs / "three.ndjson").write_text(json.dumps(chunk(3)) + "\n")
    (docs / "data.csv").write_text("a,b\n")
    runner = CliRunner()
    done = runner.invoke(cli, ["--dsn", store, "index", "docs", *(str(docs / n) for n in ("one.md", "two.txt"))])
    assert done.exit_code == 0, done.output
    assert _chunk_ids(store) == ["docs/one.md#", "docs/two.txt#"]
    done = runner.invoke(cli, ["--dsn", store, "index", "docs", str(docs / "three.ndjson")])
    assert done.exit_code == 0, done.output
    before = table_hashes(store)
    refused = runner.invoke(cli, ["--dsn", store, "index", "docs", str(docs / "data.csv")])
    assert refused.exit_code == 1
    assert refused.output.startswith(f"error: {docs / 'data.csv'}: unknown kind of source .csv")
    assert len(refused.output.strip().splitlines()) == 1
    assert table_hashes(store) == before
    # the folder gives the same ids: indexing it over the single files changes nothing
    again = runner.invoke(cli, ["--dsn", store, "index", "docs", str(docs), "--json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.output)["unchanged"] == 2


def test_empty_and_whitespace_only_documents_count_as_skipped(store: str, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("good text")
    (docs / "empty.txt").write_text("")
    (docs / "blank.md").write_text(" \n\n\t ")
    result = CliRunner().invoke(cli, ["--dsn", store, "index", "docs", str(docs), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert (report["inserted"], report["skipped"]) == (1, 2)


def test_a_file_name_that_is_not_utf8_is_named_escaped_in_one_line(store: str, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("good text")
    with open(os.path.join(os.fsencode(docs), b"bad\xff.md"), "w") as out:
        out.write("text of a document whose name is not UTF-8")
    result = run_cli(["--dsn", store, "index", "docs", str(docs)], timeout=60)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {docs}/bad\\udcff.md: cannot index this document"), lines
    result = run_cli(["--dsn", store, "index", "docs", str(docs), "--skip-bad-files", "--json"], timeout=60)
    assert result.returncode == 0, result.stderr
    assert [item["path"] for item in json.loads(result.stdout)["skipped_files"]] == [f"{docs}/bad\\xff.md"]
    assert _chunk_ids(store) == ["docs/good.md#"]


def test_a_budgets_file_nested_deep_or_a_fifo_is_one_clear_line(tmp_path: Path) -> None:
    deep_json = tmp_path / "budgets.json"
    deep_json.write_text('{"default": ' + "[" * 5000 + "]" * 5000 + "}")
    deep_toml = tmp_path / "budgets.toml"
    deep_toml.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    for path, expected in (
        (deep_json, f"error: {deep_json}: JSON nested 5001 levels deep"),
        (deep_toml, f"error: {deep_toml}: cannot parse budgets: maximum recursion depth exceeded"),
        (fifo, f"error: {fifo}: not a regular file (a FIFO)"),
    ):
        result = run_cli(["context-pack", "--brief", "b", "--budgets", str(path)], timeout=60)
        assert result.returncode == 1, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(expected), lines


def test_a_sub_folder_that_cannot_be_listed_stops_the_run_unless_skip_bad_files(store: str, tmp_path: Path) -> None:
    """A tree deeper than PATH_MAX (4,096 bytes) cannot be listed past that depth, even by root."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("good text")
    fd = os.open(docs, os.O_RDONLY)
    for i in range(20):  # 20 x 250 characters, made relative to an open folder (the full path is too long)
        name = str(i % 10) * 250
        os.mkdir(name, dir_fd=fd)
        inner = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    document = os.open("hidden.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(document, b"a document the walk cannot reach")
    os.close(document)
    os.close(fd)
    before = table_hashes(store)
    with connect(store) as conn, pytest.raises(InvalidInput, match="cannot list: File name too long"):
        index_sources(conn, "docs", open_sources([str(docs)]), prune=True)
    assert table_hashes(store) == before
    sources = open_sources([str(docs)], skip_bad_files=True)
    with connect(store) as conn:
        assert index_sources(conn, "docs", sources).inserted == 1
    assert [s.reason for s in skipped_files(sources)] == ["cannot list: File name too long"]
