#!/usr/bin/env bash
# Runs both fuzz targets under atheris (libFuzzer): PACKETS inputs through
# the packet path (default 1,000,000), COREFILES inputs through the
# Corefile parser and setup (default 100,000), seed 1, 10 s per input at
# most.  The corpus starts from fuzz/seeds.py; crashes land in
# fuzz/artifacts/ with each target's log.  Arguments name the targets to
# run (default: both).  Ends with one line per target: inputs, seconds,
# execs/s.
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
PACKETS=${PACKETS:-1000000}
COREFILES=${COREFILES:-100000}
"$PY" -c "import atheris" 2>/dev/null || "$PY" -m pip install -q atheris
"$PY" -m fuzz.seeds fuzz/corpus
mkdir -p fuzz/artifacts
status=0
[ $# -gt 0 ] || set -- packets corefiles
for kind in "$@"; do
  case $kind in
    packets) runs=$PACKETS ;;
    corefiles) runs=$COREFILES ;;
    *) echo "unknown target: $kind" >&2; exit 2 ;;
  esac
  log=fuzz/artifacts/$kind.log
  start=$(date +%s)
  rc=0
  nice "$PY" -m fuzz."$kind" -runs="$runs" -seed=1 -timeout=10 \
    -max_len=4096 -print_final_stats=1 \
    -artifact_prefix=fuzz/artifacts/"$kind"- fuzz/corpus/"$kind" \
    >"$log" 2>&1 || rc=$?
  [ "$rc" = 0 ] || status=1
  secs=$(( $(date +%s) - start ))
  done_=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  echo "$kind: ${done_:-0} inputs in ${secs}s" \
    "($(( ${done_:-0} / (secs > 0 ? secs : 1) ))/s), exit $rc"
done
exit "$status"
