"""Which of ragstore's modules a ``ragstore search`` runs code in, from the command to the statement and back.

Not a timing: a route. It indexes examples/sample.jsonl into a family of the minilm backend (a semantic
family, so the default mode is hybrid), runs ``ragstore search FAMILY QUERY`` once to warm every import,
then runs it again in this process under ``sys.setprofile`` and lists, in the order first entered, every
module of the ``ragstore`` package a function of which was called (module bodies run by an import are left
out: the route, not the start-up). ``--mode`` picks another mode; ``--dsn`` a server (default: a throwaway
embedded one, see benchmarks/_db.py).

    python benchmarks/search_route.py [--mode auto] [--dsn DSN]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _db import admin_dsn, scratch_database

from ragstore.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
FAMILY = "route"
QUERY = "copy files and directories"


def route(args: list[str]) -> tuple[list[str], str]:
    """The ragstore modules entered while ``ragstore ARGS`` runs, in first-entered order, and its output."""
    seen: dict[str, None] = {}

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call" or frame.f_code.co_name == "<module>":
            return
        name = frame.f_globals.get("__name__", "")
        if name == "ragstore" or name.startswith("ragstore."):
            seen.setdefault(name, None)

    runner = CliRunner()
    sys.setprofile(profile)
    try:
        result = runner.invoke(cli, args, catch_exceptions=False)
    finally:
        sys.setprofile(None)
    return list(seen), result.output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", default="auto")
    parser.add_argument("--dsn", default=None)
    args = parser.parse_args()
    with admin_dsn(args.dsn) as admin, scratch_database(admin) as dsn:
        os.environ["RAGSTORE_DSN"] = dsn
        runner = CliRunner()
        for command in (
            ["family", "create", FAMILY, "--backend", "minilm"],
            ["index", FAMILY, str(ROOT / "examples" / "sample.jsonl"), "--no-progress"],
        ):
            done = runner.invoke(cli, command, catch_exceptions=False)
            if done.exit_code != 0:
                sys.exit(done.output)
        search = ["search", FAMILY, QUERY, "-k", "5", "--mode", args.mode]
        route(search)  # warm: every import done, the backend loaded
        modules, output = route(search)
        if "no hits" in output or not output.strip():
            sys.exit(f"the search found nothing: {output}")
        print(f"ragstore {' '.join(search)}: {len(modules)} ragstore modules")
        for module in modules:
            print(f"  {module}")


if __name__ == "__main__":
    main()
