#!/usr/bin/env bash
# Installs everything the tests need (a venv with the package, the example
# and contrib/ plugin packages, Debian servers the integration tests
# start (pebble: a test ACME CA), iproute2 and iptables for node-cache's test in a network
# namespace), runs the linters (ruff over the
# tree, mypy over the typed contract modules: each counts as one test) and
# the whole trial suite.  Ends with a line "N passed, N failed[, N skipped]";
# exits non-zero when anything failed.
set -u
cd "$(dirname "$0")/.."

DEBS="unbound knot knot-dnsutils bind9-utils bind9-dnsutils ldnsutils etcd-server iproute2 iptables prometheus pebble"
missing=""
for p in $DEBS; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq >/dev/null 2>&1
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null 2>&1 \
    || echo "warning: could not install:$missing" >&2
fi
# Debian starts these on install; the tests run their own instances
# (prometheus is there for promtool).
for svc in unbound knot etcd prometheus; do
  (systemctl stop "$svc" || service "$svc" stop) >/dev/null 2>&1 || true
done

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || $PY -m venv .venv
.venv/bin/pip install -q --upgrade pip >/dev/null 2>&1
.venv/bin/pip install -q -e '.[test]' --config-settings editable_mode=compat 2>&1 | grep -v -i "warning" >&2
.venv/bin/pip install -q --no-build-isolation ./examples/corednstw-example 2>&1 | grep -v -i "warning" >&2
# The add-on plugin packages, each its own distribution (their tests run
# from tests/test_contrib_<name>.py).
for pkg in contrib/*/pyproject.toml; do
  [ -e "$pkg" ] || continue
  .venv/bin/pip install -q --no-build-isolation "./$(dirname "$pkg")" 2>&1 | grep -v -i "warning" >&2
done

# Linters first; a failure is reported but the trial suite still runs.
checks=$(mktemp)
check() {
  local name=$1
  shift
  echo "== $name"
  if "$@"; then
    echo "ok $name" >>"$checks"
  else
    echo "FAILED $name" >>"$checks"
    echo "== $name FAILED (see above)"
  fi
}
check "ruff check ." .venv/bin/ruff check --output-format=concise .
check "mypy" .venv/bin/mypy

out=$(mktemp)
.venv/bin/trial --reporter=text ${TRIAL_ARGS:-} "${@:-tests}" 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
if grep -q "^FAILED" "$checks"; then
  sed 's/^/lint: /' "$checks"
  status=1
fi
.venv/bin/python scripts/summary.py "$out" "$checks"
rm -f "$out" "$checks"
exit "$status"
