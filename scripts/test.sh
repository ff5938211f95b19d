#!/usr/bin/env bash
# Set up everything on a fresh machine (a venv with ragstore, its extras and the test tools) and run the
# tests against a real PostgreSQL + pgvector (RAGSTORE_TEST_DSN, else Docker, else the embedded server).
#
# The tests run in parallel (pytest-xdist, one worker per core; RAGSTORE_TEST_WORKERS=N to choose), each
# worker with its own embedded server and template database, every test under a timeout (pytest-timeout).
# Tests of one xdist_group run on one worker (the Citus tests share one local cluster).
# Extra arguments go to pytest. A first argument --fast runs the fast tier, the inner loop:
#     scripts/test.sh --fast      # = -m "not reliability and not minilm and not slow and not other_storage"
# The tests marked citus need Citus in the embedded PostgreSQL: it is built here when missing
# (scripts/build_citus.sh: from the source tarball, cached per machine, minutes the first time, a second
# after). RAGSTORE_CITUS=skip does not build it; without it (or its source) the citus tests are skipped, and
# this script and pytest's header each say so in one line.
# Exits non-zero on any failure, and also when no test was collected.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_venv.sh "dev,minilm,plot,langchain,llamaindex,parquet,server,documents,mcp"
if [ "${RAGSTORE_CITUS:-}" = skip ]; then
    echo "test.sh: citus tests skipped unless Citus is already built (RAGSTORE_CITUS=skip)" >&2
else
    status=0
    scripts/build_citus.sh || status=$?
    if [ "$status" = 2 ]; then
        echo "test.sh: citus tests skipped: the Citus source is missing (set RAGSTORE_CITUS_TARBALL)" >&2
    elif [ "$status" != 0 ]; then
        echo "test.sh: building Citus failed (above); fix it or run with RAGSTORE_CITUS=skip" >&2
        exit "$status"
    fi
fi
if [ "${1:-}" = --fast ]; then
    shift
    set -- -m "not reliability and not minilm and not slow and not other_storage" "$@"
fi
# A temporary folder of this run only: pytest's shared numbered folders are pruned by other concurrent
# pytest runs of the same user, which would delete a running worker's embedded server.
basetemp=$(mktemp -d "${TMPDIR:-/tmp}/ragstore-tests.XXXXXX")
trap 'rm -rf "$basetemp"' EXIT
.venv/bin/python -m pytest -n "${RAGSTORE_TEST_WORKERS:-auto}" --dist loadgroup --basetemp "$basetemp/run" "$@"
