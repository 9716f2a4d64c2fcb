#!/usr/bin/env bash
# Installs corednstw into a venv and serves Corefile.example on port 1053.
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || $PY -m venv .venv
.venv/bin/pip install -q --upgrade pip >/dev/null 2>&1
.venv/bin/pip install -q -e . --config-settings editable_mode=compat >/tmp/corednstw-install.log 2>&1 \
  || { cat /tmp/corednstw-install.log >&2; exit 1; }
exec .venv/bin/twistd -n --pidfile= coredns -c "${1:-Corefile.example}"
