#!/usr/bin/env bash
# One measured run of one configuration, from environment variables: the public benchmark's
# interface (DURATION, CONNECTIONS, REQUEST_TYPE, RATE_LIMITER_TYPE, OUTPUT_FILE) plus ours.
# run-all.sh calls this same script for every run it makes.
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"

usage() {
  cat <<USAGE
usage: [VAR=value ...] ./scripts/run-benchmark.sh

  DURATION           seconds measured (default 30)
  CONNECTIONS        concurrent connections (default 10)
  REQUEST_TYPE       a workload (below; nostr-sender-only: the sender charged only, no
                     verification; nostr-relay-verified: authors charged on the relay's OK;
                     nostr-at-limit: every author sends past a quota of 10, and the run
                     fails if any was stored past it; nostr-long-tail: every event from a
                     new author, as a public relay's writers; nostr-reads: REQs for pages of
                     50 notes of 2000 stored, as a public relay's readers) (default light)
  RATE_LIMITER_TYPE  an implementation (below), optionally with :cluster (default
                     valkey-glide); relay-alone is the load straight to the relay (nostr)
  RELAY_IMPL         a relay (below); nostr-rs-relay (from crates.io) and khatru (relays/khatru,
                     from Go modules) are nostr only, built on first use and cached, see
                     docs/BENCHMARKS.md (default reference)
  RATE               HTTP: offer N requests/s (open loop, latency from intended send times)
                     instead of the closed loop (default: closed)
  OUTPUT_FILE        result file (default results/<timestamp>/<standard name>.json)

  WARMUP             seconds of unrecorded load first (default 3)
  RUN, RUNS          index of this run and runs in the session (default 1, 1)
  KEYS               client identities in the load (default 10000)
  DISTRIBUTION       uniform | zipf (default uniform); ZIPF_EXPONENT (default 1.1)
  FLOOD_SHARE        flood: share of identities far over their limit (default 0.9)
  QUOTA_POINTS, QUOTA_WINDOW_SEC   write quota per identity (default 6000 per 60 s;
                     nostr: 1000000, so that nothing is refused in a throughput run)
  FRESH_EVENTS_PER_SEC  nostr: upper rate the new events are signed for (default 8000)
  AUTHORS            nostr: distinct keys signing the events (default 1000; nostr-at-limit 100;
                     nostr-long-tail: one per event, not settable)
  WORKERS            gateway processes: N or auto (one per core it may use) (default 1)
  CPUS               single box: pin the relay, the gateway and the run's Valkey to these
                     cores with taskset, e.g. 0,1 (default: not pinned)
  LOAD_CPUS          pin the load generator to these cores (default: not pinned)
  IN_MEMORY_BLOCK    1 or 0 (default 1)
  WORK_ITERATIONS    relay CPU work per write (default 500 for heavy, else 0)
  SEED               seed of the event pool and the key draw (default 1)
  VALKEY_STANDALONE  host:port of a running standalone Valkey (else one is started)
  VALKEY_CLUSTER     host:port of any node of a running cluster (else one is started)
  RELAY_URL          a running reference relay with the workload's WORK_ITERATIONS
                     (else one is started for this run; not with a third-party RELAY_IMPL)
  RESULTS_DIR        where the result goes when OUTPUT_FILE is not set
  SLUICE_SKIP_SETUP  1: do not install or build (run-all.sh has done it)

The names, as the run file's schema lists them (docs/run-file.schema.json):
USAGE
  node -e 'const s = require(process.argv[1]), p = s.properties.config.properties;
    console.log(`  workloads: ${s.$defs.workloadName.enum.join(" | ")}`);
    for (const [key, label] of [["implementation", "implementations"], ["relayImpl", "relays"]])
      console.log(`  ${label}: ${p[key].enum.join(" | ")}`);' \
    "$ROOT/docs/run-file.schema.json"
}
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  "") ;;
  *) usage >&2; die "run-benchmark.sh takes its settings from the environment, not arguments" ;;
esac

DURATION="${DURATION:-30}"
CONNECTIONS="${CONNECTIONS:-10}"
REQUEST_TYPE="${REQUEST_TYPE:-light}"
RATE_LIMITER_TYPE="${RATE_LIMITER_TYPE:-valkey-glide}"

RELAY_IMPL="${RELAY_IMPL:-reference}"
case "$RELAY_IMPL" in
  reference) ;;
  nostr-rs-relay | khatru)
    [[ "$REQUEST_TYPE" == nostr* ]] \
      || die "$RELAY_IMPL only speaks Nostr: REQUEST_TYPE=$REQUEST_TYPE needs RELAY_IMPL=reference" ;;
  *) die "RELAY_IMPL: unknown relay '$RELAY_IMPL' (reference, nostr-rs-relay, khatru)" ;;
esac

if [ "${SLUICE_SKIP_SETUP:-0}" != 1 ]; then
  setup
  case "$RELAY_IMPL" in
    nostr-rs-relay) ensure_nostr_rs_relay ;;
    khatru) ensure_khatru_relay ;;
  esac
fi
export SLUICE_RUN_DIR="${SLUICE_RUN_DIR:-$ROOT/.run/run-benchmark}"

cleanup() {
  stop_started
  [ -z "${OWN_VALKEY:-}" ] || "${SLUICE[@]}" valkey stop --all >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

case "$RATE_LIMITER_TYPE" in
  *:cluster) mode=cluster ;;
  *) mode=standalone ;;
esac
if [ "$mode" = cluster ]; then
  valkey="${VALKEY_CLUSTER:-}"
  if [ -z "$valkey" ]; then
    base="${SLUICE_BENCH_CLUSTER_BASE:-7300}"
    OWN_VALKEY=1
    "${SLUICE[@]}" valkey start --cluster --base-port "$base" >&2
    valkey="127.0.0.1:$base"
  fi
else
  valkey="${VALKEY_STANDALONE:-}"
  if [ -z "$valkey" ]; then
    port="${SLUICE_BENCH_STANDALONE_PORT:-6381}"
    OWN_VALKEY=1
    "${SLUICE[@]}" valkey start --port "$port" >&2
    valkey="127.0.0.1:$port"
  fi
fi

# Every workload by name, Nostr variants included: bench run knows what each one sets.
args=(bench run --implementation "$RATE_LIMITER_TYPE" --workload "$REQUEST_TYPE"
  --connections "$CONNECTIONS" --duration "$DURATION" --warmup "${WARMUP:-3}"
  --run "${RUN:-1}" --runs "${RUNS:-1}" --keys "${KEYS:-10000}"
  --distribution "${DISTRIBUTION:-uniform}" --zipf-exponent "${ZIPF_EXPONENT:-1.1}"
  --flood-share "${FLOOD_SHARE:-0.9}" --quota-window-sec "${QUOTA_WINDOW_SEC:-60}"
  --seed "${SEED:-1}" --valkey "$valkey" --relay-impl "$RELAY_IMPL")
# Unset: the workload's default (6000; nostr: 1000000).
# Open loop: a fixed offered rate, latency from each request's intended send time.
[ -z "${RATE:-}" ] || args+=(--rate "$RATE")
[ -z "${QUOTA_POINTS:-}" ] || args+=(--quota-points "$QUOTA_POINTS")
[ -z "${FRESH_EVENTS_PER_SEC:-}" ] || args+=(--fresh-events-per-sec "$FRESH_EVENTS_PER_SEC")
[ -z "${AUTHORS:-}" ] || args+=(--authors "$AUTHORS")
[ -z "${WORKERS:-}" ] || args+=(--workers "$WORKERS")
[ -z "${CPUS:-}" ] || args+=(--cpus "$CPUS")
[ -z "${LOAD_CPUS:-}" ] || args+=(--load-cpus "$LOAD_CPUS")
[ "${IN_MEMORY_BLOCK:-1}" = 1 ] || args+=(--no-in-memory-block)
[ -z "${WORK_ITERATIONS:-}" ] || args+=(--work-iterations "$WORK_ITERATIONS")
[ -z "${RELAY_URL:-}" ] || args+=(--relay "$RELAY_URL")
if [ -n "${OUTPUT_FILE:-}" ]; then
  args+=(--out "$OUTPUT_FILE")
else
  if [ -z "${RESULTS_DIR:-}" ]; then
    RESULTS_DIR="$ROOT/results/$(results_stamp)"
    mkdir -p "$RESULTS_DIR"
    ln -sfn "$(basename "$RESULTS_DIR")" "$ROOT/results/latest"
  fi
  args+=(--out-dir "$RESULTS_DIR")
fi

# Exit status: 0 the run is usable, 2 it finished but failed (the file says why), 1 error.
"${SLUICE[@]}" "${args[@]}"
