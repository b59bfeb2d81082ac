#!/usr/bin/env bash
# The test command: installs what is missing, builds, lints, starts its own Valkey
# (standalone and a 6-node cluster, on ports away from the defaults), runs the Node and
# Python suites, and stops Valkey on every exit path.
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"

STANDALONE_PORT="${SLUICE_TEST_STANDALONE_PORT:-6390}"
CLUSTER_BASE="${SLUICE_TEST_CLUSTER_BASE:-7100}"
# Bounds so that nothing hangs the run. Each test has its own bound (describe/it options in
# the Node files, pytest.ini's timeout for Python); node's --test-timeout also bounds each
# whole file in Node 20, so it is sized for the slowest (pressure-e2e, about 2 minutes).
# The whole-run bounds are a last guard, far above a normal run.
NODE_FILE_TIMEOUT_MS=420000
NODE_SUITE_TIMEOUT_SEC=3600
PYTHON_SUITE_TIMEOUT_SEC=600
# The suite's Valkey state lives apart from instances a user started by hand.
export SLUICE_RUN_DIR="$ROOT/.run/test"
REPORTS="$SLUICE_RUN_DIR/reports"

started_at=$(date +%s)
setup
ensure_chromium
ensure_prometheus

stop_valkey() { "${SLUICE[@]}" valkey stop --all >/dev/null 2>&1 || true; }

# Run a command under a time bound (exit 124 when it runs out). `timeout` puts the command in
# a process group of its own, away from the terminal's Ctrl-C, so it runs in the background
# here: `wait` returns on INT or TERM, and the trap below passes the signal on.
bounded_pid=
bounded() {
  local seconds=$1
  shift
  timeout --kill-after=30 "$seconds" "$@" &
  bounded_pid=$!
  local rc=0
  wait "$bounded_pid" || rc=$?
  bounded_pid=
  return "$rc"
}
stop_bounded() {
  [ -n "$bounded_pid" ] || return 0
  kill -TERM "$bounded_pid" 2>/dev/null || true
  wait "$bounded_pid" 2>/dev/null || true
}

trap stop_valkey EXIT
trap 'stop_bounded; exit 130' INT TERM

mkdir -p "$REPORTS"
say "starting Valkey: standalone on $STANDALONE_PORT, cluster on $CLUSTER_BASE-$((CLUSTER_BASE + 5))"
"${SLUICE[@]}" valkey start --port "$STANDALONE_PORT"
"${SLUICE[@]}" valkey start --cluster --base-port "$CLUSTER_BASE"
export SLUICE_TEST_STANDALONE="127.0.0.1:$STANDALONE_PORT"
export SLUICE_TEST_CLUSTER="127.0.0.1:$CLUSTER_BASE"

failed=()

say "lint (eslint, prettier)"
npm run --silent lint || failed+=(lint)

say "Node tests"
# No file can hang the run: --test-force-exit ends a file once its tests are done, whatever
# handles it left open, and --test-timeout bounds each file (and each test that sets no
# bound of its own; the suites do). test/hostile may be empty or absent: nullglob.
shopt -s nullglob
node_files=(dist/test/*.test.js dist/test/hostile/*.test.js)
shopt -u nullglob
rm -f "$REPORTS/node.spec" # never count an earlier run's report
# The counts are read from the spec reporter's own summary on stdout: a file reporter's
# stream is not flushed when --test-force-exit ends the runner.
set +e
bounded "$NODE_SUITE_TIMEOUT_SEC" \
  node --test --test-concurrency=1 --test-force-exit --test-timeout="$NODE_FILE_TIMEOUT_MS" \
  --test-reporter=spec --test-reporter-destination=stdout \
  "${node_files[@]}" | tee "$REPORTS/node.spec"
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || failed+=(node)
[ "$rc" -ne 124 ] || echo "the Node suite did not finish within ${NODE_SUITE_TIMEOUT_SEC}s"
node_pass=$(sed -n 's/^ℹ pass //p' "$REPORTS/node.spec" 2>/dev/null | tail -1 || true)
node_fail=$(sed -n 's/^ℹ fail //p' "$REPORTS/node.spec" 2>/dev/null | tail -1 || true)

py_pass=0
py_fail=0
rm -f "$REPORTS/pytest.xml" # never count an earlier run's report
if compgen -G "test/python/test_*.py" >/dev/null; then
  say "Python tests"
  # A basetemp of this clone's own: pytest sessions sharing /tmp/pytest-of-$USER prune each
  # other's numbered directories, so concurrent runs on one machine can delete a live tmp_path.
  # Each test is bounded by pytest.ini's timeout; this bounds the whole suite.
  rc=0
  bounded "$PYTHON_SUITE_TIMEOUT_SEC" \
    .venv/bin/python -m pytest -q test/python --basetemp="$SLUICE_RUN_DIR/pytest-tmp" \
    --junitxml="$REPORTS/pytest.xml" || rc=$?
  [ "$rc" -eq 0 ] || failed+=(python)
  [ "$rc" -ne 124 ] || echo "the Python suite did not finish within ${PYTHON_SUITE_TIMEOUT_SEC}s"
fi
if [ -f "$REPORTS/pytest.xml" ]; then
  py_pass=$(.venv/bin/python - "$REPORTS/pytest.xml" <<'PY'
import sys, xml.etree.ElementTree as ET
s = ET.parse(sys.argv[1]).getroot()
s = s if s.tag == "testsuite" else s[0]
t, f, e, k = (int(s.get(a, 0)) for a in ("tests", "failures", "errors", "skipped"))
print(t - f - e - k, f + e)
PY
)
  py_fail=${py_pass#* }
  py_pass=${py_pass% *}
elif [[ " ${failed[*]} " == *" python "* ]]; then
  py_fail=1 # killed or crashed before it wrote a report
fi

elapsed=$(( $(date +%s) - started_at ))
say "suite took ${elapsed}s; node: ${node_pass:-0} passed, ${node_fail:-?} failed; python: $py_pass passed, $py_fail failed"
if [ "${#failed[@]}" -gt 0 ]; then
  echo "FAILED: ${failed[*]}"
fi
# One closing line for CI; a lint failure counts as one failed check.
lint_fail=0
[[ " ${failed[*]} " == *" lint "* ]] && lint_fail=1
echo "$(( ${node_pass:-0} + py_pass )) passed, $(( ${node_fail:-1} + py_fail + lint_fail )) failed"
[ "${#failed[@]}" -eq 0 ]
