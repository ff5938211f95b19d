# Sourced by demo.sh and test.sh: make .venv (once) and install ragstore into it with the extras in $1.
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip >/dev/null
.venv/bin/python -m pip install --quiet -e ".[$1]"
