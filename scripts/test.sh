#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs the unit suite (in process, no
# Valkey: it stops here when that fails), lints, starts its own Valkey (standalone and a
# 6-node cluster, on ports away from the defaults), runs the integration and hostile Node
# suites and the Python suite, and stops Valkey on every exit path.
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"

STANDALONE_PORT="${SLUICE_TEST_STANDALONE_PORT:-6390}"
CLUSTER_BASE="${SLUICE_TEST_CLUSTER_BASE:-7100}"
# Bounds so that nothing hangs the run. Each test has its own bound (describe/it options in
# the Node files, pytest.ini's timeout for Python); node's --test-timeout also bounds each
# whole file in Node 20, so it is sized for the slowest (pressure-e2e, about 2 minutes).
# The whole-run bounds are a last guard, far above a normal run.
NODE_FILE_TIMEOUT_MS=420000
UNIT_SUITE_TIMEOUT_SEC=600
# Unit files run side by side, one per core: in process, each on its own temporary files and
# ephemeral ports. The suites on the shared Valkey run one file at a time.
UNIT_CONCURRENCY="${SLUICE_TEST_UNIT_CONCURRENCY:-$(nproc)}"
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

# The third-party relays, for the tests that run in front of them (AUTH, --relay-impl, the
# README's path): nostr-rs-relay built from crates.io with cargo (several minutes) and the
# khatru relay from Go modules with go (a minute or two), each once per machine, in the
# background at the lowest priority while the rest of the suite runs; then those files run
# last. They are also the CPU-heavy neighbours the suite must stay green beside. A relay
# whose toolchain is missing, or whose build fails or runs late, has its tests skip, saying why.
RELAY_FILES=(
  dist/test/integration/third-party-auth.test.js
  dist/test/integration/third-party-dialects.test.js
  dist/test/integration/relay-impl.test.js
  dist/test/integration/readme-path.test.js
  dist/test/hostile/khatru-unparsable-signatures.test.js
)
RELAY_BUILD_WAIT_SEC="${SLUICE_TEST_RELAY_BUILD_WAIT_SEC:-1500}"
relay_build_pids=()
relay_build_names=()
mkdir -p "$SLUICE_RUN_DIR"
# start_relay_build IMPL ENSURE_FUNCTION TOOL_FOUND: the build in a session of its own, so that
# every exit path can stop it whole by its group.
start_relay_build() {
  local impl=$1 ensure=$2 found=$3 bin
  bin="$("${SLUICE[@]}" bench relay-install --relay-impl "$impl" --print-path)"
  [ ! -x "$bin" ] && [ -z "${SLUICE_TEST_NO_RELAY_BUILD:-}" ] || return 0
  if [ "$found" != yes ]; then
    say "the toolchain for $impl was not found: the tests in front of it will skip"
    return 0
  fi
  say "building $impl in the background (log: $SLUICE_RUN_DIR/$impl-build.log)"
  setsid bash -c "renice -n 19 \$\$ >/dev/null; source scripts/lib/common.sh; $ensure" \
    >"$SLUICE_RUN_DIR/$impl-build.log" 2>&1 &
  relay_build_pids+=($!)
  relay_build_names+=("$impl")
}
start_relay_build nostr-rs-relay ensure_nostr_rs_relay "$(have_cargo && echo yes || true)"
start_relay_build khatru ensure_khatru_relay "$(have_go && echo yes || true)"
stop_relay_build() {
  local pid
  for pid in "${relay_build_pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  relay_build_pids=()
}

trap 'stop_valkey; stop_relay_build' EXIT
trap 'stop_bounded; stop_relay_build; exit 130' INT TERM

# The compiled test files under dist/test/<dir> (any depth) whose source is still in test/:
# a file moved or deleted leaves its old build behind, which must not run.
node_test_files() {
  local dir f
  shopt -s globstar nullglob
  for dir in "$@"; do
    for f in dist/test/"$dir"/**/*.test.js; do
      f=${f#dist/}
      if [ -f "${f%.js}.ts" ]; then echo "dist/$f"; fi
    done
  done
  shopt -u globstar nullglob
}

# Node test files, run under the suite's bounds (one at a time unless node_concurrency is
# set for the call): --test-force-exit ends a file
# once its tests are done, whatever handles it left open (unless node_force_exit=0 for the
# call: the unit suite leaves none, and the flag can drop a file's last results, nodejs/node
# #64833), and --test-timeout bounds each file
# (and each test that sets no bound of its own; the suites do). The counts are read from the
# spec reporter's own summary on stdout (a file reporter's stream is not flushed when
# --test-force-exit ends the runner) and added to node_pass and node_fail.
node_pass=0
node_fail=0
node_counts_unknown=
node_suite() {
  local name=$1 seconds=$2 spec="$REPORTS/node-$1.spec" rc pass fail
  local force_exit_flag=--test-force-exit
  [ "${node_force_exit:-1}" = 1 ] || force_exit_flag=
  shift 2
  [ "$#" -gt 0 ] || return 0 # node --test without files would look for its own
  rm -f "$spec" # never count an earlier run's report
  set +e
  bounded "$seconds" \
    node --test --test-concurrency="${node_concurrency:-1}" ${force_exit_flag} \
    --test-timeout="$NODE_FILE_TIMEOUT_MS" --test-reporter=spec --test-reporter-destination=stdout \
    "$@" | tee "$spec"
  rc=${PIPESTATUS[0]}
  set -e
  [ "$rc" -ne 124 ] || echo "the Node $name suite did not finish within ${seconds}s"
  pass=$(sed -n 's/^ℹ pass //p' "$spec" 2>/dev/null | tail -1 || true)
  fail=$(sed -n 's/^ℹ fail //p' "$spec" 2>/dev/null | tail -1 || true)
  node_pass=$((node_pass + ${pass:-0}))
  if [ -n "$fail" ]; then node_fail=$((node_fail + fail)); else node_counts_unknown=1; fi
  return "$rc"
}

failed=()
py_pass=0
py_fail=0

# The closing lines, and the exit status: non-zero when any part failed.
finish() {
  local elapsed=$(($(date +%s) - started_at)) shown_fail=$node_fail lint_fail=0
  # A suite whose report lacks its counts (killed, or crashed) counts as one failure at least.
  if [ -n "$node_counts_unknown" ]; then
    shown_fail='?'
    [ "$node_fail" -gt 0 ] || node_fail=1
  fi
  say "suite took ${elapsed}s; node: $node_pass passed, $shown_fail failed; python: $py_pass passed, $py_fail failed"
  if [ "${#failed[@]}" -gt 0 ]; then
    echo "FAILED: ${failed[*]}"
  fi
  # One closing line for CI; a lint failure counts as one failed check.
  [[ " ${failed[*]} " == *" lint "* ]] && lint_fail=1
  echo "$((node_pass + py_pass)) passed, $((node_fail + py_fail + lint_fail)) failed"
  [ "${#failed[@]}" -eq 0 ]
}

mkdir -p "$REPORTS"

# In process, with fakes and injected clocks: no Valkey (its variables are unset, so a test
# that reaches for it fails here), so it runs before Valkey starts, and a failure stops the
# run before the slower suites.
say "Node unit tests"
mapfile -t unit_files < <(node_test_files unit)
if [ "${#unit_files[@]}" -gt 0 ]; then
  if ! SLUICE_TEST_STANDALONE='' SLUICE_TEST_CLUSTER='' node_concurrency="$UNIT_CONCURRENCY" node_force_exit=0 \
    node_suite unit "$UNIT_SUITE_TIMEOUT_SEC" "${unit_files[@]}"; then
    failed+=(unit)
    say "the unit suite failed: the Valkey-dependent suites are not run"
    finish || exit 1
  fi
fi

say "starting Valkey: standalone on $STANDALONE_PORT, cluster on $CLUSTER_BASE-$((CLUSTER_BASE + 5))"
"${SLUICE[@]}" valkey start --port "$STANDALONE_PORT"
"${SLUICE[@]}" valkey start --cluster --base-port "$CLUSTER_BASE"
export SLUICE_TEST_STANDALONE="127.0.0.1:$STANDALONE_PORT"
export SLUICE_TEST_CLUSTER="127.0.0.1:$CLUSTER_BASE"

say "lint (eslint, prettier)"
npm run --silent lint || failed+=(lint)

say "Node integration and hostile tests"
node_files=()
while read -r f; do
  [[ " ${RELAY_FILES[*]} " == *" $f "* ]] || node_files+=("$f")
done < <(node_test_files integration hostile)
node_suite integration "$NODE_SUITE_TIMEOUT_SEC" "${node_files[@]}" || failed+=(node)

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

for i in "${!relay_build_pids[@]}"; do
  pid=${relay_build_pids[$i]} impl=${relay_build_names[$i]}
  say "waiting for the $impl build (at most ${RELAY_BUILD_WAIT_SEC}s from the start)"
  while kill -0 "$pid" 2>/dev/null && [ $(( $(date +%s) - started_at )) -lt "$RELAY_BUILD_WAIT_SEC" ]; do
    sleep 5
  done
  if kill -0 "$pid" 2>/dev/null; then
    say "the $impl build did not finish in time: its tests skip"
    kill -TERM -- "-$pid" 2>/dev/null || true
  elif [ ! -x "$("${SLUICE[@]}" bench relay-install --relay-impl "$impl" --print-path)" ]; then
    say "the $impl build failed (see $SLUICE_RUN_DIR/$impl-build.log): its tests skip"
    tail -5 "$SLUICE_RUN_DIR/$impl-build.log" || true
  fi
done
relay_build_pids=()
say "Node tests in front of the third-party relays"
node_suite third-party "$NODE_SUITE_TIMEOUT_SEC" "${RELAY_FILES[@]}" || failed+=(node-third-party)

finish
