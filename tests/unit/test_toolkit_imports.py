"""Tests share one toolkit: no module under tests/ imports a test module (``test_*.py``), not even in
the code a test hands to a subprocess; what several modules share lives in tests/toolkit/ (or a conftest)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
# ``tests.pkg.test_x``, ``tests.test_x`` or a relative ``.test_x``, as an import or in code passed as a string
TEST_MODULE = re.compile(r"(^|\.)test_\w+$")
IN_STRING = re.compile(r"\b(from|import)\s+(tests\.[\w.]*\btest_\w+|\.+test_\w+)")


def imports_of(path: Path) -> list[str]:
    """The modules ``path`` imports (``from X import`` and ``import X``) and the ones its strings import."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            found += [module] if node.module else [f"{module}{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += [m.group(2) for m in IN_STRING.finditer(node.value)]
    return found


def test_no_module_under_tests_imports_a_test_module():
    offenders = [
        f"{path.relative_to(TESTS)}: {module}"
        for path in sorted(TESTS.rglob("*.py"))
        for module in imports_of(path)
        if TEST_MODULE.search(module)
    ]
    assert not offenders, offenders


def test_the_check_sees_each_form_of_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    t = "test" + "_"  # the sample's imports spelled so that this file holds none itself
    sample.write_text(
        f"from tests.integration.{t}roles import app_dsn\n"
        f"import tests.cli.{t}readme\n"
        f"from . import {t}store\n"
        f"def f():\n    from .{t}hybrid import family\n"
        f"CODE = 'from tests.integration.{t}family_migrate import _child; _child()'\n"
        "from tests.toolkit.roles import app_dsn as fine\n",
        encoding="utf-8",
    )
    flagged = sorted(m for m in imports_of(sample) if TEST_MODULE.search(m))
    assert flagged == [
        ".test_hybrid",
        ".test_store",
        "tests.cli.test_readme",
        "tests.integration.test_family_migrate",
        "tests.integration.test_roles",
    ]
