"""One source per fact for the SQL functions: migrations read their frozen SQL from files, and the copies
for people in ``sql/`` match the newest frozen revision that defines each function.

A migration that (re)defines a function puts its SQL in ``migrations/versions/sql/NNNN_name.sql`` (NNNN
its revision); the newest file defining a function is the one ``sql/*.sql`` must match.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from ragstore.migrate import migrations_dir

ROOT = Path(__file__).resolve().parents[2]
PEOPLE = ROOT / "sql"
VERSIONS = ROOT / "migrations" / "versions"
FROZEN = VERSIONS / "sql"

_CREATE = re.compile(r"CREATE(?: OR REPLACE)? FUNCTION ragstore\.(\w+)\(", re.IGNORECASE)
_BODY_START = re.compile(r"\bAS\s+(\$\w*\$)", re.IGNORECASE)
_COMMENT = re.compile(r"COMMENT ON FUNCTION ragstore\.(\w+)\([^)]*\) IS\s+'(?:[^']|'')*'", re.IGNORECASE)


def definitions(text: str) -> dict[str, str]:
    """``{function name: its CREATE statement (as CREATE FUNCTION) and its COMMENT}`` in ``text``."""
    found: dict[str, str] = {}
    for match in _CREATE.finditer(text):
        body = _BODY_START.search(text, match.end())
        assert body is not None, f"no dollar-quoted body after {match.group(0)}"
        tag = body.group(1)
        end = text.index(tag, body.end()) + len(tag)
        statement = "CREATE FUNCTION " + text[match.start() : end].split("FUNCTION ", 1)[1]
        found[match.group(1)] = statement
    for match in _COMMENT.finditer(text):
        found[match.group(1)] = found.get(match.group(1), "") + "\n" + match.group(0)
    return found


def newest_frozen() -> dict[str, tuple[str, str]]:
    """``{function: (frozen file name, definition)}`` from the newest revision file defining each."""
    newest: dict[str, tuple[str, str]] = {}
    for path in sorted(FROZEN.glob("*.sql")):  # NNNN_ prefixes: name order is revision order
        if path.stem.endswith("_down"):  # a downgrade restores an older definition
            continue
        for name, statement in definitions(path.read_text(encoding="utf-8")).items():
            newest[name] = (path.name, statement)
    return newest


def _migration(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"migration_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_parser_finds_create_and_comment() -> None:
    text = (
        "CREATE OR REPLACE FUNCTION ragstore.f(a int) RETURNS int LANGUAGE sql AS $fn$ SELECT 1; $fn$;\n"
        "COMMENT ON FUNCTION ragstore.f(int) IS 'one; it''s so';\n"
    )
    assert definitions(text) == {
        "f": "CREATE FUNCTION ragstore.f(a int) RETURNS int LANGUAGE sql AS $fn$ SELECT 1; $fn$\n"
        "COMMENT ON FUNCTION ragstore.f(int) IS 'one; it''s so'"
    }


@pytest.mark.parametrize(
    ("script", "frozen"), [("0002_search.py", "0002_search.sql"), ("0005_hybrid.py", "0005_hybrid.sql")]
)
def test_migrations_run_their_frozen_sql_file(script: str, frozen: str) -> None:
    module = _migration(VERSIONS / script)
    assert module.UPGRADE == (FROZEN / frozen).read_text(encoding="utf-8")
    assert "CREATE FUNCTION" not in (VERSIONS / script).read_text(encoding="utf-8")


def test_the_frozen_files_sit_where_the_installed_migrations_read_them() -> None:
    # migrations_dir() is the repository's migrations/ here and ragstore/_migrations in a wheel (the
    # pyproject's force-include copies the whole folder, sql/ included).
    assert {p.name for p in (migrations_dir() / "versions" / "sql").glob("*.sql")} >= {
        "0002_search.sql",
        "0005_hybrid.sql",
    }
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"migrations" = "ragstore/_migrations"' in pyproject


def test_people_sql_matches_the_newest_frozen_definition_of_each_function() -> None:
    newest = newest_frozen()
    checked = 0
    for people in sorted(PEOPLE.glob("*.sql")):
        for name, statement in definitions(people.read_text(encoding="utf-8")).items():
            assert name in newest, f"sql/{people.name}: ragstore.{name} is defined by no file in {FROZEN}"
            frozen_file, frozen = newest[name]
            assert statement == frozen, f"sql/{people.name}: ragstore.{name} differs from {frozen_file}"
            checked += 1
    assert checked >= 3  # search, search_text, hybrid_search


def test_no_migration_script_defines_a_people_function_inline() -> None:
    # A redefinition pasted into a .py would escape the check above: it belongs in migrations/versions/sql/.
    people = {name for path in PEOPLE.glob("*.sql") for name in definitions(path.read_text(encoding="utf-8"))}
    for script in sorted(VERSIONS.glob("*.py")):
        inline = set(definitions(script.read_text(encoding="utf-8"))) & people
        assert not inline, f"{script.name} defines {sorted(inline)} inline; put its SQL in {FROZEN.name}/"
