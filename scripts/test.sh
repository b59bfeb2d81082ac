#!/usr/bin/env bash
# The test command: installs what is missing, builds, lints, starts its own Valkey
# (standalone and a 6-node cluster, on ports away from the defaults), runs the Node and
# Python suites, and stops Valkey on every exit path.
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"

STANDALONE_PORT="${SLUICE_TEST_STANDALONE_PORT:-6390}"
CLUSTER_BASE="${SLUICE_TEST_CLUSTER_BASE:-7100}"
# The suite's Valkey state lives apart from instances a user started by hand.
export SLUICE_RUN_DIR="$ROOT/.run/test"
REPORTS="$SLUICE_RUN_DIR/reports"

started_at=$(date +%s)
setup
ensure_chromium

stop_valkey() { "${SLUICE[@]}" valkey stop --all >/dev/null 2>&1 || true; }
trap stop_valkey EXIT
trap 'exit 130' INT TERM

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
node --test --test-concurrency=1 \
  --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=tap --test-reporter-destination="$REPORTS/node.tap" \
  dist/test/*.test.js || failed+=(node)
node_pass=$(sed -n 's/^# pass //p' "$REPORTS/node.tap" | tail -1)
node_fail=$(sed -n 's/^# fail //p' "$REPORTS/node.tap" | tail -1)

py_pass=0
py_fail=0
if compgen -G "tests/python/test_*.py" >/dev/null; then
  say "Python tests"
  set +e
  .venv/bin/python -m pytest -q tests/python --junitxml="$REPORTS/pytest.xml"
  rc=$?
  set -e
  [ "$rc" -eq 0 ] || failed+=(python)
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
