#!/usr/bin/env bash
# Installs corednstw into a venv and serves Corefile.example on port 1053.
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || $PY -m venv .venv
.venv/bin/pip install -q --upgrade pip >/dev/null 2>&1
log=$(mktemp)
.venv/bin/pip install -q -e . --config-settings editable_mode=compat >"$log" 2>&1 \
  || { cat "$log" >&2; exit 1; }
rm -f "$log"
exec .venv/bin/twistd -n --pidfile= coredns -c "${1:-Corefile.example}"
