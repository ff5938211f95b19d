"""The README, the docs site and sql/examples.sql: every command is documented on a task page and in the
generated CLI reference, the README states what ships, and its examples run as written."""

import re
from pathlib import Path

import click

from ragstore import families
from ragstore.cli.main import cli
from ragstore.embed.offline import OfflineBackend
from ragstore.ingest.readers import open_sources
from ragstore.ingest.run import index_sources
from tests.toolkit.readme import sql_statements

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
GUIDE = "".join(page.read_text(encoding="utf-8") for page in sorted((ROOT / "docs" / "guide").glob("*.md")))


def command_paths(group: click.Group, prefix: str = "") -> list[str]:
    paths = []
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        path = f"{prefix}{name}"
        paths.append(path)
        if isinstance(command, click.Group):
            paths.extend(command_paths(command, f"{path} "))
    return paths


def test_every_command_is_on_a_task_page():
    paths = command_paths(cli)
    assert len(paths) > 10
    missing = [p for p in paths if f"ragstore {p}" not in GUIDE]
    assert missing == []


def test_the_cli_reference_is_generated_from_the_whole_command_group():
    """mkdocs-click renders every command and subcommand of ``ragstore.cli.main:cli`` (mkdocs build --strict
    in .ci/run builds it); the page must point at that group, with its subcommands."""
    page = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    assert "::: mkdocs-click" in page
    assert ":module: ragstore.cli.main" in page and ":command: cli" in page
    assert ":prog_name: ragstore" in page and ":list_subcommands: true" in page
    assert "reference/cli.md" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def test_the_readme_is_a_front_door():
    assert len(README.splitlines()) <= 250
    for command in (
        "scripts/demo.sh",
        "scripts/test.sh",
        "ragstore migrate",
        "ragstore family create",
        "ragstore index",
        "ragstore search",
    ):
        assert command in README, command


def test_the_readme_states_the_shipped_defaults():
    from ragstore.search.fusion import DEFAULT_FUSION

    assert (DEFAULT_FUSION.fusion, DEFAULT_FUSION.normalization) == ("cc", "tmm")
    assert "convex combination" in README and "theoretical min-max" in README
    assert f"α {DEFAULT_FUSION.alpha:g}" in README and f"{DEFAULT_FUSION.per_leg} candidates per leg" in README
    assert "hybrid RRF" not in README
    default = section("Install")
    assert "uses `minilm` when the `minilm` extra is" in default and "the family uses `offline`" in default


def test_every_docs_link_of_the_readme_exists():
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", README)
    assert len(links) >= 10
    assert [link for link in links if not (ROOT / link).is_file()] == []


def section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end > 0 else None]


def test_the_input_files_the_readme_names_exist():
    named = re.findall(r"--(?:state|budgets|file) (\S+)", README + GUIDE)
    named += re.findall(r"ragstore index \w+ (\S+)", section("Quick start by hand"))
    assert len(named) >= 5
    assert [p for p in named if not (ROOT / p).exists()] == []


def test_the_quick_start_installs_the_extras_the_readme_uses():
    extras = re.search(r"pip install -e '\.\[([\w,]+)\]'", section("Quick start by hand"))
    assert extras is not None
    installed = set(extras.group(1).split(","))
    if "--plot" in README:
        assert "plot" in installed
    if "--backend minilm" in README:
        assert "minilm" in installed


def test_every_query_of_sql_examples_answers_on_the_quick_start_family(conn):
    families.create_family(conn, "docs", OfflineBackend())
    index_sources(conn, "docs", open_sources([str(ROOT / "examples" / "sample.jsonl")]))
    statements = sql_statements((ROOT / "sql" / "examples.sql").read_text(encoding="utf-8"))
    selects = [s for s in statements if s.upper().startswith("SELECT")]
    assert len(selects) >= 6
    empty = []
    for statement in statements:
        cur = conn.execute(statement)
        if statement.upper().startswith("SELECT") and not cur.fetchall():
            empty.append(statement.splitlines()[-1])
    assert empty == []


def test_the_library_example_runs_as_written_after_the_quick_start(dsn, conn, monkeypatch, capsys):
    families.create_family(conn, "docs", OfflineBackend())
    conn.commit()
    code = re.search(r"```python\n(.*?)```", section("Library"), re.S)
    assert code is not None
    monkeypatch.setenv("RAGSTORE_DSN", dsn)
    monkeypatch.chdir(ROOT)
    exec(compile(code.group(1), "README.md#library", "exec"), {})
    assert "notes: 3 inserted" in capsys.readouterr().out  # beside the quick start's family "docs"
