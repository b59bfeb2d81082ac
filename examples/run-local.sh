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
# --public-url: NIP-42 AUTH challenges, for the URL clients use (the gateway's nostr.publicUrl)
"${SLUICE[@]}" relay --port 7001 --node-id relay-a --public-url ws://127.0.0.1:8080 & pids+=($!)
"${SLUICE[@]}" relay --port 7002 --node-id relay-b --public-url ws://127.0.0.1:8080 & pids+=($!)
sleep 1
# One feed beside each relay: memory above 256 MiB of RSS lowers that node's quotas.
"${SLUICE[@]}" feed --node-id relay-a --relay http://127.0.0.1:7001 --target-bytes 256MiB & pids+=($!)
"${SLUICE[@]}" feed --node-id relay-b --relay http://127.0.0.1:7002 --target-bytes 256MiB & pids+=($!)
# The example file's admin token is a public placeholder, which the gateway refuses: bring
# your own in SLUICE_ADMIN_TOKEN, or this run makes one and keeps it in .run/admin-token.
if [ -z "${SLUICE_ADMIN_TOKEN:-}" ]; then
  token_file="${SLUICE_RUN_DIR:-$ROOT/.run}/admin-token"
  mkdir -p "$(dirname "$token_file")"
  (umask 077 && node -e "process.stdout.write(require('node:crypto').randomBytes(24).toString('hex'))" > "$token_file")
  SLUICE_ADMIN_TOKEN="$(cat "$token_file")"
  export SLUICE_ADMIN_TOKEN
  say "admin token for this run in $token_file (set SLUICE_ADMIN_TOKEN to choose your own)"
fi
"${SLUICE[@]}" gateway --config examples/gateway.yaml & pids+=($!)
# Five processes start on this machine at once: wait until the gateway says it is ready.
ready() { node -e "fetch('http://127.0.0.1:8081/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"; }
for _ in $(seq 1 120); do ready && break; sleep 0.5; done
ready || die "the gateway did not become ready; see the output above"
echo "gateway ready on http://127.0.0.1:8080 (ws://127.0.0.1:8080 for Nostr), admin on 127.0.0.1:8081; Ctrl-C to stop"
wait
