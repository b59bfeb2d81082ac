#!/usr/bin/env bash
# Valkey + two reference relays + the gateway on one machine, all on 127.0.0.1.
# Ctrl-C stops everything this script started.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
setup

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  "${SLUICE[@]}" valkey stop >/dev/null || true
}
trap cleanup EXIT INT TERM

"${SLUICE[@]}" valkey start                                   # 127.0.0.1:6379
"${SLUICE[@]}" relay --port 7001 --node-id relay-a & pids+=($!)
"${SLUICE[@]}" relay --port 7002 --node-id relay-b & pids+=($!)
sleep 1
"${SLUICE[@]}" gateway --config examples/gateway.yaml & pids+=($!)
echo "gateway on http://127.0.0.1:8080 (ws://127.0.0.1:8080 for Nostr); Ctrl-C to stop"
wait
