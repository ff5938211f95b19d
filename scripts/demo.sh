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
rs search sample "copy files and directories" -k 3          # offline family: full text by default
# The semantic path: all-MiniLM-L6-v2 from the installed model package (no download), hybrid by default.
rs family show sample_minilm >/dev/null 2>&1 || rs family create sample_minilm --backend minilm
rs index sample_minilm examples/sample.jsonl
rs search sample_minilm "copy files and directories" -k 3
rs search sample_minilm "copy files and directories" -k 3 --mode hnsw --rerank mmr --lambda 0.5
