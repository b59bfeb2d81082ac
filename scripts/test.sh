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

# nostr-rs-relay, for the tests that run in front of it (AUTH, --relay-impl, the README's
# path): built from crates.io in the background at the lowest priority while the rest of the
# suite runs (several minutes, once per machine), then those files run last. It is also the
# CPU-heavy neighbour the suite must stay green beside. Without cargo they skip, saying why.
NRR_FILES=(dist/test/nostr-rs-relay-auth.test.js dist/test/relay-impl.test.js dist/test/readme-path.test.js)
NRR_BUILD_WAIT_SEC="${SLUICE_TEST_RELAY_BUILD_WAIT_SEC:-1500}"
nrr_build_pid=
nrr_bin="$("${SLUICE[@]}" bench relay-install --print-path)"
if [ ! -x "$nrr_bin" ] && [ -z "${SLUICE_TEST_NO_RELAY_BUILD:-}" ]; then
  if command -v cargo >/dev/null || [ -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" ]; then
    say "building nostr-rs-relay in the background (log: $SLUICE_RUN_DIR/nostr-rs-relay-build.log)"
    mkdir -p "$SLUICE_RUN_DIR"
    # Its own session, so that every exit path can stop the whole build by its group.
    setsid bash -c 'renice -n 19 $$ >/dev/null; source scripts/lib/common.sh; ensure_nostr_rs_relay' \
      >"$SLUICE_RUN_DIR/nostr-rs-relay-build.log" 2>&1 &
    nrr_build_pid=$!
  else
    say "cargo not found: the tests in front of nostr-rs-relay will skip (install Rust to run them)"
  fi
fi
stop_relay_build() {
  [ -n "$nrr_build_pid" ] || return 0
  kill -TERM -- "-$nrr_build_pid" 2>/dev/null || true
  nrr_build_pid=
}

trap 'stop_valkey; stop_relay_build' EXIT
trap 'stop_bounded; stop_relay_build; exit 130' INT TERM

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
node_files=()
for f in dist/test/*.test.js dist/test/hostile/*.test.js; do
  [[ " ${NRR_FILES[*]} " == *" $f "* ]] || node_files+=("$f")
done
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

if [ -n "$nrr_build_pid" ]; then
  say "waiting for the nostr-rs-relay build (at most ${NRR_BUILD_WAIT_SEC}s from the start)"
  while kill -0 "$nrr_build_pid" 2>/dev/null && [ $(( $(date +%s) - started_at )) -lt "$NRR_BUILD_WAIT_SEC" ]; do
    sleep 5
  done
  if kill -0 "$nrr_build_pid" 2>/dev/null; then
    say "the nostr-rs-relay build did not finish in time: its tests skip"
    stop_relay_build
  elif [ ! -x "$nrr_bin" ]; then
    say "the nostr-rs-relay build failed (see $SLUICE_RUN_DIR/nostr-rs-relay-build.log): its tests skip"
    tail -5 "$SLUICE_RUN_DIR/nostr-rs-relay-build.log" || true
  fi
  nrr_build_pid=
fi
say "Node tests in front of nostr-rs-relay"
rm -f "$REPORTS/node-nrr.spec"
set +e
bounded "$NODE_SUITE_TIMEOUT_SEC" \
  node --test --test-concurrency=1 --test-force-exit --test-timeout="$NODE_FILE_TIMEOUT_MS" \
  --test-reporter=spec --test-reporter-destination=stdout \
  "${NRR_FILES[@]}" | tee "$REPORTS/node-nrr.spec"
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || failed+=(node-nrr)
nrr_pass=$(sed -n 's/^ℹ pass //p' "$REPORTS/node-nrr.spec" 2>/dev/null | tail -1 || true)
nrr_fail=$(sed -n 's/^ℹ fail //p' "$REPORTS/node-nrr.spec" 2>/dev/null | tail -1 || true)
node_pass=$(( ${node_pass:-0} + ${nrr_pass:-0} ))
[ -n "$node_fail" ] && [ -n "$nrr_fail" ] && node_fail=$(( node_fail + nrr_fail )) || node_fail=

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
