#!/usr/bin/env bash
# The README's quick start on the command line: migrate, create a family, index a file and a folder,
# search, read back, delete, drop. On $RAGSTORE_DSN when it is set, else on the embedded PostgreSQL of a
# throwaway home (removed at the end). The offline backend: no model, no network.
#     bash examples/cli.sh            (ragstore on the PATH, e.g. after `. .venv/bin/activate`)
set -euo pipefail
cd "$(dirname "$0")/.."
rs() { echo "+ ragstore $*" >&2; "${RAGSTORE:-ragstore}" "$@"; }
if [ -z "${RAGSTORE_DSN:-}" ]; then
    RAGSTORE_HOME=$(mktemp -d "${TMPDIR:-/tmp}/ragstore-example.XXXXXX")
    export RAGSTORE_HOME
    trap 'rs server stop >/dev/null 2>&1 || true; rm -rf "$RAGSTORE_HOME"' EXIT
fi
rs migrate
rs family drop example_cli --yes >/dev/null 2>&1 || true
rs family create example_cli --backend offline
rs index example_cli examples/sample.jsonl
rs index example_cli examples/sample.jsonl                     # a rerun writes nothing: 0 inserted
rs search example_cli "copy files and directories" -k 3
rs index example_cli docs/guide --as guide                     # a folder of documents: guide/index.md#<hash>, ...
rs search example_cli "remove chunks by id" -k 3 --package guide/
rs get example_cli 'man1/cp.1#0'
rs list example_cli --package guide/ --limit 5
rs delete example_cli --package guide/ --dry-run
rs family drop example_cli --yes
