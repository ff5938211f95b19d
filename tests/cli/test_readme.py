"""Every command and subcommand of the CLI is documented in the README (as `ragstore <path>`)."""

from pathlib import Path

import click

from ragstore.cli.main import cli

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


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


def test_every_command_is_in_the_readme():
    paths = command_paths(cli)
    assert len(paths) > 10
    missing = [p for p in paths if f"ragstore {p}" not in README]
    assert missing == []
