"""Which of ragstore's modules a ``ragstore index`` runs code in, from the command to the statement and back.

Not a timing: a route, traced as benchmarks/search_route.py traces a search. It creates two families of
the offline backend (no model to load), indexes a folder of Markdown (docs/guide) into the first to warm
every import, then indexes the same folder into the second, empty, family in this process under
``sys.setprofile`` and lists, in the order first entered, every module of the ``ragstore`` package a
function of which was called (module bodies run by an import are left out: the route, not the start-up).
``--folder`` picks another folder; ``--dsn`` a server (default: a throwaway embedded one, see
benchmarks/_db.py).

    python benchmarks/index_route.py [--folder docs/guide] [--dsn DSN]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _db import admin_dsn, scratch_database
from search_route import route

from ragstore.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--folder", type=Path, default=ROOT / "docs" / "guide")
    parser.add_argument("--dsn", default=None)
    args = parser.parse_args()
    with admin_dsn(args.dsn) as admin, scratch_database(admin) as dsn:
        os.environ["RAGSTORE_DSN"] = dsn
        runner = CliRunner()
        for family in ("warm", "route"):
            done = runner.invoke(cli, ["family", "create", family, "--backend", "offline"], catch_exceptions=False)
            if done.exit_code != 0:
                sys.exit(done.output)
        route(["index", "warm", str(args.folder), "--no-progress"])  # warm: every import done
        index = ["index", "route", str(args.folder), "--no-progress"]
        modules, output = route(index)
        if " inserted" not in output or output.startswith("route: 0 inserted"):
            sys.exit(f"the index wrote nothing: {output}")
        print(f"ragstore {' '.join(index)}: {len(modules)} ragstore modules")
        print(f"  ({output.strip().splitlines()[0]})")
        for module in modules:
            print(f"  {module}")


if __name__ == "__main__":
    main()
