"""Start-up: the command line imports heavy modules only where a command uses them.

Not timed (benchmarks/startup.py measures); these check which modules a fresh interpreter has loaded.
"""

import json
import subprocess
import sys

import click

from ragstore import families
from ragstore.cli.main import COMMANDS, cli, load_command
from ragstore.embed.offline import OfflineBackend
from ragstore.ingest.records import ChunkRecord
from ragstore.ingest.run import write_records

HEAVY = ("alembic", "sqlalchemy", "numpy", "psycopg", "pydantic", "httpx", "onnxruntime", "matplotlib")
NEVER_FOR_SEARCH = ("alembic", "sqlalchemy", "pydantic", "httpx", "onnxruntime", "matplotlib")


def loaded_after(code: str) -> set[str]:
    """The top-level packages a fresh interpreter has imported after running ``code``."""
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_importing_the_entry_point_loads_no_heavy_module():
    assert loaded_after("import ragstore.cli.main").isdisjoint(HEAVY)


def test_importing_ragstore_loads_no_heavy_module_until_a_name_is_used():
    assert loaded_after("import ragstore").isdisjoint(HEAVY)
    assert "psycopg" in loaded_after("import ragstore\nragstore.connect")


def test_help_loads_no_heavy_module():
    code = (
        "import contextlib, io\nfrom ragstore.cli.main import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    cli(['--help'], prog_name='ragstore')"
    )
    assert loaded_after(code).isdisjoint(HEAVY)


def test_a_search_loads_neither_alembic_nor_the_other_unused_libraries(dsn, conn):
    fam = families.create_family(conn, "docs", OfflineBackend())
    write_records(conn, fam, OfflineBackend(), [("1", ChunkRecord(chunk_id="a", package_path="p", text="copy files"))])
    code = (
        "import contextlib, io\nfrom ragstore.cli.main import cli\nout = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        f"    cli(['--dsn', {dsn!r}, 'search', 'docs', 'copy files', '--json'], standalone_mode=False)\n"
        "assert json.loads(out.getvalue())['hits'][0]['chunk_id'] == 'a', out.getvalue()\n"
    )
    loaded = loaded_after("import json\n" + code)
    assert "psycopg" in loaded
    assert loaded.isdisjoint(NEVER_FOR_SEARCH), sorted(loaded & set(NEVER_FOR_SEARCH))


def test_the_summaries_in_the_listing_are_the_commands_own():
    ctx = click.Context(cli)
    assert set(COMMANDS) <= set(cli.list_commands(ctx))
    for name, (_, _, summary) in COMMANDS.items():
        command = load_command(name)
        assert command.name == name
        assert command.get_short_help_str(limit=10_000) == summary, name


def test_family_migrate_is_reachable_under_family():
    family = load_command("family")
    assert isinstance(family, click.Group)
    assert family.get_command(click.Context(family), "migrate") is not None


def test_the_listing_is_what_click_prints_with_every_command_loaded():
    eager = click.Group("ragstore", params=cli.params, help=cli.help)
    for name in COMMANDS:
        eager.add_command(load_command(name), name)
    for width in (60, 80, 200):
        lazy_fmt, eager_fmt = click.HelpFormatter(width=width), click.HelpFormatter(width=width)
        cli.format_commands(click.Context(cli), lazy_fmt)
        eager.format_commands(click.Context(eager), eager_fmt)
        assert lazy_fmt.getvalue() == eager_fmt.getvalue()


def test_a_command_added_the_usual_way_is_listed_and_runs():
    from click.testing import CliRunner

    @click.command("hello-extra")
    def hello() -> None:
        """Say hello (a command added with add_command)."""
        click.echo("hello")

    cli.add_command(hello)
    try:
        runner = CliRunner()
        listing = runner.invoke(cli, ["--help"]).output.splitlines()
        assert [line.split() for line in listing if "hello-extra" in line] == [
            ["hello-extra", "Say", "hello", "(a", "command", "added", "with", "add_command)."]
        ]
        assert runner.invoke(cli, ["hello-extra"]).output == "hello\n"
    finally:
        cli.commands.pop("hello-extra")
