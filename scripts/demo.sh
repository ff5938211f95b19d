#!/usr/bin/env bash
# The main job end to end on the embedded PostgreSQL: install, migrate, index a sample, search.
# The data goes where commands typed by hand look too: $RAGSTORE_HOME, else the per-user data folder
# (`ragstore server status` shows it). The server keeps running afterwards; `ragstore server stop` stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_venv.sh "minilm"
external_dsn=${RAGSTORE_DSN:-}
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

home=$(.venv/bin/python -c "from ragstore import config; print(config.home_dir())")
cat <<MSG

Done. The families 'sample' and 'sample_minilm' live in the embedded server under
    $home
(the same place commands typed by hand use), and the server keeps running there. Try:
    . .venv/bin/activate            # puts ragstore on the PATH
    ragstore family list
    ragstore search sample_minilm "how do I compare two files" -k 5
    ragstore server stop            # stops the server; the data is kept and it starts again on demand
MSG
if [ -n "$external_dsn" ]; then
    echo "Note: RAGSTORE_DSN is set in your shell, so your own commands use that server; unset it to reach this one."
fi
