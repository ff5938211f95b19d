"""`ragstore family migrate` on the command line: dry run, migration, abort, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from ragstore import families
from ragstore.cli.main import cli
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from tests.toolkit.family_migrate import HashBackend, write_jsonl


def run(dsn: str, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--dsn", dsn, "family", "migrate", *args])


def test_dry_run_then_migrate_then_nothing_left_to_do(dsn: str, conn: Any, tmp_path: Path) -> None:
    families.create_family(conn, "docs", HashBackend())
    index_sources(conn, "docs", open_sources([str(write_jsonl(tmp_path / "c.jsonl", 20))]), backend=HashBackend())
    plan = json.loads(run(dsn, "docs", "--backend", "offline", "--dry-run", "--sample", "4", "--json").output)
    assert (plan["chunks"], plan["to_embed"], plan["sample"]) == (20, 20, 4)
    assert plan["target"] == "offline/fingerprint-v1 (16-d)"
    assert families.get_family(conn, "docs").backend == "fake"
    done = run(dsn, "docs", "--backend", "offline", "--batch-size", "6", "--json")
    report = json.loads(done.output)
    assert done.exit_code == 0 and report["swapped"] and report["written"] == 20
    family_now = families.get_family(conn, "docs")
    assert (family_now.backend, family_now.dim, family_now.table) == ("offline", 16, report["table"])
    again = run(dsn, "docs", "--backend", "offline")
    assert again.exit_code == 1 and "already holds offline/fingerprint-v1" in again.output


def test_abort_without_a_migration_and_a_missing_backend_are_one_line_errors(dsn: str, conn: Any) -> None:
    families.create_family(conn, "docs", HashBackend())
    aborted = run(dsn, "docs", "--abort")
    assert aborted.exit_code == 1 and aborted.output.strip() == "error: family 'docs' is not migrating"
    bare = run(dsn, "docs")
    assert bare.exit_code == 1 and "--backend NAME" in bare.output
    unknown = run(dsn, "nope", "--backend", "offline")
    assert unknown.exit_code == 1 and "no family named 'nope'" in unknown.output
