"""One text per SQL function: each function of schema ragstore is written once, in
``ragstore/sql/functions/<name>.sql``, and nowhere else in the package, the migrations, the SQL for people
or the docs; each such file is one replaceable function, which ``ragstore migrate`` may re-apply."""

from __future__ import annotations

import re
from pathlib import Path

from ragstore.db import schema
from ragstore.migrate import migrations_dir

ROOT = Path(__file__).resolve().parents[2]
# Where product text lives (tests/ define throwaway functions of their own, and
# benchmarks/ingest_server_profile.py variants of a trigger body it measures, never the shipped one).
SCANNED = ("ragstore", "migrations", "sql", "docs", "examples", "README.md")
_CREATE = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+ragstore\.(\w+)\s*\(", re.IGNORECASE)
_OTHER_DDL = re.compile(r"^\s*(CREATE|ALTER|DROP)\s+(?!OR\s+REPLACE\s+FUNCTION)", re.IGNORECASE | re.MULTILINE)


def texts() -> list[Path]:
    found: list[Path] = []
    for name in SCANNED:
        path = ROOT / name
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.suffix in {".sql", ".py", ".md"}]
        found += [p for p in files if "__pycache__" not in p.parts]
    return found


def sites(paths: list[Path], root: Path) -> dict[str, list[str]]:
    """Each ragstore function created in ``paths``: the files (relative to ``root``) that create it."""
    where: dict[str, list[str]] = {}
    for path in paths:
        for match in _CREATE.finditer(path.read_text(encoding="utf-8")):
            where.setdefault(match.group(1), []).append(str(path.relative_to(root)))
    return where


def test_each_function_is_written_once_in_its_own_file() -> None:
    expected = {f.name.removesuffix(".sql"): [f"ragstore/sql/functions/{f.name}"] for f in schema.functions()}
    assert sites(texts(), ROOT) == expected


def test_the_check_finds_a_function_written_twice(tmp_path: Path) -> None:
    (tmp_path / "one.sql").write_text("CREATE OR REPLACE FUNCTION ragstore.fts_scores(q text) RETURNS int")
    (tmp_path / "two.py").write_text('DDL = """create function  ragstore.fts_scores (q text) returns int"""')
    found = sites(sorted(tmp_path.iterdir()), tmp_path)
    assert found == {"fts_scores": ["one.sql", "two.py"]}


def test_each_function_file_is_one_replaceable_function() -> None:
    for function in schema.functions():
        assert len(_CREATE.findall(function.text)) == 1, function.name
        assert function.text.lstrip("-").find("CREATE OR REPLACE FUNCTION") >= 0, function.name
        assert _OTHER_DDL.search(function.text) is None, function.name


def test_schema_sql_has_its_sections_in_build_order() -> None:
    text = schema.SCHEMA_FILE.read_text(encoding="utf-8")
    positions = [text.index(f"-- section: {name}\n") for name in schema.SECTIONS]
    assert positions == sorted(positions)
    assert _CREATE.search(text) is None  # functions live in their files


def test_the_baseline_reads_its_sql_where_the_installed_migrations_are() -> None:
    # migrations_dir() is the repository's migrations/ here and ragstore/_migrations in a wheel (the
    # force-include of pyproject.toml); the baseline reads its frozen file next to itself.
    assert (migrations_dir() / "versions" / "sql" / "0006_baseline.sql").is_file()
    assert (migrations_dir() / "versions" / "0006_baseline.py").is_file()
