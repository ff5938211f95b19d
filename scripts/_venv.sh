# Sourced by demo.sh and test.sh: make .venv (once) and install ragstore into it with the extras in $1.
# RAGSTORE_SKIP_INSTALL=1 uses .venv as it is (the tests run the demo that way).
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
if [ "${RAGSTORE_SKIP_INSTALL:-}" != 1 ]; then
    .venv/bin/python -m pip install --quiet --upgrade pip >/dev/null
    .venv/bin/python -m pip install --quiet -e ".[$1]"
fi
