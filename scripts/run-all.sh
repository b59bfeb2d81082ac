#!/usr/bin/env bash
# The main command. Installs what is missing, starts its own Valkey (standalone and a 6-node
# cluster), runs the work, and stops everything it started on every exit path.
#
# Until the full benchmark suite lands, every mode runs the smoke: consume through each of
# the three clients on both topologies, check the admitted counts, print a table.
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"

usage() {
  cat <<USAGE
usage: ./scripts/run-all.sh [--quick] [--help]

  --quick   set up, start Valkey (standalone + cluster), consume through every client on
            both topologies, print a table, stop (about a minute)
  --help    this text

Environment: SLUICE_BENCH_STANDALONE_PORT (default 6380), SLUICE_BENCH_CLUSTER_BASE (default 7200).
USAGE
}

for arg in "$@"; do
  case "$arg" in
    --quick) ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown option: $arg" ;;
  esac
done

STANDALONE_PORT="${SLUICE_BENCH_STANDALONE_PORT:-6380}"
CLUSTER_BASE="${SLUICE_BENCH_CLUSTER_BASE:-7200}"
export SLUICE_RUN_DIR="$ROOT/.run/bench"

setup

stop_valkey() { "${SLUICE[@]}" valkey stop --all >/dev/null 2>&1 || true; }
trap stop_valkey EXIT
trap 'exit 130' INT TERM

say "starting Valkey: standalone on $STANDALONE_PORT, cluster on $CLUSTER_BASE-$((CLUSTER_BASE + 5))"
"${SLUICE[@]}" valkey start --port "$STANDALONE_PORT"
"${SLUICE[@]}" valkey start --cluster --base-port "$CLUSTER_BASE"

say "smoke: every client on both topologies"
"${SLUICE[@]}" bench smoke --standalone "127.0.0.1:$STANDALONE_PORT" --cluster "127.0.0.1:$CLUSTER_BASE"
