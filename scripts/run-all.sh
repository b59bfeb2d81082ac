#!/usr/bin/env bash
# The main command: benchmark every chosen client x topology x workload x concurrency, N runs
# each, interleaved, through ./scripts/run-benchmark.sh; then write the HTML report and CSV.
# Installs what is missing, starts its own Valkey (standalone and a 6-node cluster) and
# reference relays unless addresses are given, and stops everything it started on every exit.
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"

usage() {
  cat <<USAGE
usage: ./scripts/run-all.sh [options]        (no options on a terminal: a menu)

  --quick                 every client on both topologies (light), with and without leases,
                          plus flood, Nostr and the adaptive scenario on standalone; 4 s runs
                          x 3, 1000 identities: the whole thing in about ten minutes
  --clients LIST          valkey-glide, iovalkey, ioredis, each optionally +lease (quota
                          leases on) and :cluster (e.g. iovalkey+lease:cluster), comma- or
                          space-separated; or a group: all | standalone | cluster | lease
                          (default all: the three clients without leases, both topologies)
  --workload W            light | heavy | both | flood | nostr | adaptive | fleet | spike |
                          everything, or a comma list of them (default both). fleet: \`sluice
                          bench fleet\` once (three relays, one degrades; sticky, round-robin
                          and headroom routing, 90 s each) through the first client on
                          standalone, into <results>/fleet/ (fleet-bench.json, fleet-bench.md).
                          spike: \`sluice bench spike\` (reaction time and peak memory when a
                          relay's memory jumps, the feed's fast tick on and off; about four
                          minutes, its own table)
  --duration-mode M       dynamic (120 s up to 100 connections, 180 s above, +30 s for cluster)
                          | fixed30 | fixed120 | custom:N (default dynamic)
  --concurrency "N ..."   connection counts (default "50 100")
  --runs N                runs per configuration (default 3)
  --warmup S              unrecorded seconds before each run (default 3)
  --keys N                client identities in the load (default 10000)
  --distribution D        uniform | zipf (default uniform)
  --no-baselines          skip quotas-off and the @fastify/rate-limit peer (Nostr keeps
                          relay-alone: it is what "through the gateway / relay alone" divides by)
  --relay-impl R          reference | nostr-rs-relay (default reference). nostr-rs-relay is
                          built from crates.io on first use (cargo and protoc; cached under
                          \${XDG_CACHE_HOME:-~/.cache}/sluice/relays) and speaks Nostr only:
                          it needs --workload nostr
  --valkey-standalone H:P use a running standalone Valkey instead of starting one
  --valkey-cluster H:P    use a running cluster (any node) instead of starting one
  --relay URL             use a running relay for light/flood (heavy: --heavy-relay URL,
                          which must run with --work-iterations 500); Nostr runs start a fresh
                          relay each, unless this is given
  --rate N                HTTP workloads: offer N requests/s per run (open loop, latency from
                          each request's intended send time) instead of the closed loop
  --seed N                seed of the run order, event pool and key draw (default 1)
  --help                  this text

Results: results/<YYYYMMDD_HHMMSS>/ (one JSON per run, benchmark.log, README.md, report.html,
summary.csv) and the results/latest link.
USAGE
}

clients="all"
workload="both"
duration_mode="dynamic"
concurrency="50 100"
runs=3
warmup=3
keys=10000
distribution="uniform"
baselines=1
seed=1
rate=""
quick=0
valkey_standalone=""
valkey_cluster=""
relay_url=""
heavy_relay_url=""
relay_impl="reference"
adaptive_duration=180

need() { [ "$#" -ge 2 ] && [ -n "$2" ] || die "$1 needs a value (see --help)"; }

menu() {
  local choice
  echo "sluice benchmark: choose (Enter keeps the default)"
  echo " 1) quick: every client with and without leases, both topologies, about ten minutes"
  echo " 2) standard: light + heavy, 30 s runs, 50 and 100 connections, 3 runs"
  echo " 3) full: light + heavy + flood + nostr + adaptive + fleet + spike, dynamic durations"
  echo " 4) custom"
  read -r -p "mode [1]: " choice
  case "${choice:-1}" in
    1) quick=1 ;;
    2) duration_mode=fixed30 ;;
    3) workload=everything ;;
    4)
      read -r -p "clients (all|standalone|cluster|lease|list, e.g. iovalkey+lease:cluster) [$clients]: " choice
      clients="${choice:-$clients}"
      read -r -p "workload (light|heavy|both|flood|nostr|adaptive|fleet|spike|everything) [$workload]: " choice
      workload="${choice:-$workload}"
      read -r -p "duration mode (dynamic|fixed30|fixed120|custom:N) [$duration_mode]: " choice
      duration_mode="${choice:-$duration_mode}"
      read -r -p "concurrency [$concurrency]: " choice
      concurrency="${choice:-$concurrency}"
      read -r -p "runs [$runs]: " choice
      runs="${choice:-$runs}"
      ;;
    *) die "no such choice: $choice" ;;
  esac
}

original_args=("$@")
if [ "$#" -eq 0 ] && [ -t 0 ] && [ -t 1 ]; then
  menu
fi
while [ "$#" -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --clients) need "$@"; clients="$2"; shift ;;
    --workload) need "$@"; workload="$2"; shift ;;
    --duration-mode) need "$@"; duration_mode="$2"; shift ;;
    --concurrency) need "$@"; concurrency="$2"; shift ;;
    --runs) need "$@"; runs="$2"; shift ;;
    --warmup) need "$@"; warmup="$2"; shift ;;
    --keys) need "$@"; keys="$2"; shift ;;
    --distribution) need "$@"; distribution="$2"; shift ;;
    --no-baselines) baselines=0 ;;
    --valkey-standalone) need "$@"; valkey_standalone="$2"; shift ;;
    --valkey-cluster) need "$@"; valkey_cluster="$2"; shift ;;
    --relay) need "$@"; relay_url="$2"; shift ;;
    --heavy-relay) need "$@"; heavy_relay_url="$2"; shift ;;
    --relay-impl) need "$@"; relay_impl="$2"; shift ;;
    --seed) need "$@"; seed="$2"; shift ;;
    --rate) need "$@"; rate="$2"; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown option: $1" ;;
  esac
  shift
done

if [ "$quick" = 1 ]; then
  clients="all,lease"
  workload="light,flood,nostr,adaptive"
  duration_mode="custom:4"
  concurrency="50"
  warmup=1
  keys=1000
  adaptive_duration=30
fi

# --- validate and expand the choices ---------------------------------------------------
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || die "--runs must be a positive integer, got '$runs'"
[[ "$warmup" =~ ^[0-9]+$ ]] || die "--warmup must be a whole number of seconds, got '$warmup'"
[[ "$seed" =~ ^[1-9][0-9]*$ ]] || die "--seed must be a positive integer, got '$seed'"
for c in $concurrency; do
  [[ "$c" =~ ^[1-9][0-9]*$ ]] || die "--concurrency takes positive integers, got '$c'"
done
[ -n "${concurrency// /}" ] || die "--concurrency needs at least one value"

targets=()
for item in ${clients//,/ }; do
  case "$item" in
    all) targets+=(valkey-glide iovalkey ioredis valkey-glide:cluster iovalkey:cluster ioredis:cluster) ;;
    standalone) targets+=(valkey-glide iovalkey ioredis) ;;
    cluster) targets+=(valkey-glide:cluster iovalkey:cluster ioredis:cluster) ;;
    lease) targets+=(valkey-glide+lease iovalkey+lease ioredis+lease valkey-glide+lease:cluster
      iovalkey+lease:cluster ioredis+lease:cluster) ;;
    valkey-glide | iovalkey | ioredis | valkey-glide:cluster | iovalkey:cluster | ioredis:cluster \
      | valkey-glide+lease | iovalkey+lease | ioredis+lease | valkey-glide+lease:cluster \
      | iovalkey+lease:cluster | ioredis+lease:cluster)
      targets+=("$item") ;;
    *) die "--clients: unknown client '$item' (valkey-glide, iovalkey, ioredis, optionally +lease and :cluster, or all/standalone/cluster/lease)" ;;
  esac
done
[ "${#targets[@]}" -gt 0 ] || die "--clients names no client"
modes=()
for t in "${targets[@]}"; do
  m=standalone
  [[ "$t" == *:cluster ]] && m=cluster
  [[ " ${modes[*]} " == *" $m "* ]] || modes+=("$m")
done

workloads=()
for w in ${workload//,/ }; do
  case "$w" in
    light | heavy | flood | nostr) workloads+=("$w") ;;
    both) workloads+=(light heavy) ;;
    adaptive | fleet | spike) workloads+=("$w") ;;
    everything) workloads+=(light heavy flood nostr adaptive fleet spike) ;;
    *) die "--workload: unknown workload '$w' (light, heavy, both, flood, nostr, adaptive, fleet, spike, everything)" ;;
  esac
done

case "$relay_impl" in
  reference) ;;
  nostr-rs-relay)
    for w in "${workloads[@]}"; do
      [ "$w" = nostr ] || die "--relay-impl nostr-rs-relay only speaks Nostr (WebSocket): the $w workload needs the reference relay; use --workload nostr"
    done
    [ -z "$relay_url" ] || die "--relay names a running reference relay; nostr-rs-relay is started per run" ;;
  *) die "--relay-impl: unknown relay '$relay_impl' (reference, nostr-rs-relay)" ;;
esac

duration_for() { # connections mode
  case "$duration_mode" in
    dynamic)
      local d=120
      [ "$1" -gt 100 ] && d=180
      [ "$2" = cluster ] && d=$((d + 30))
      echo "$d" ;;
    fixed30) echo 30 ;;
    fixed120) echo 120 ;;
    custom:*)
      local n="${duration_mode#custom:}"
      [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "--duration-mode custom:N needs a positive N, got '$n'"
      echo "$n" ;;
    *) die "--duration-mode: unknown mode '$duration_mode' (dynamic, fixed30, fixed120, custom:N)" ;;
  esac
}
duration_for 50 standalone >/dev/null # validate early

# Every configuration: "implementation[:cluster] workload connections duration".
configs=()
for w in "${workloads[@]}"; do
  # The fleet and spike benchmarks are commands of their own, run after the configurations.
  [ "$w" = fleet ] || [ "$w" = spike ] && continue
  if [ "$w" = adaptive ]; then
    # The pressure-feed scenario once per law, through the first chosen client.
    for law in none pid lead; do
      configs+=("${targets[0]} adaptive-$law 4 $adaptive_duration")
    done
    continue
  fi
  for c in $concurrency; do
    for t in "${targets[@]}"; do
      m=standalone
      [[ "$t" == *:cluster ]] && m=cluster
      configs+=("$t $w $c $(duration_for "$c" "$m")")
    done
    # The relay by itself, once per connection count (it has no Valkey, so no topology):
    # the denominator of "EVENT/s through the gateway / relay alone".
    [ "$w" = nostr ] && configs+=("relay-alone $w $c $(duration_for "$c" standalone)")
    # And the first client charging the sender only (no verification), and charging authors
    # on the relay's OK (nostr.verify relay): the other Nostr ratios.
    [ "$w" = nostr ] && configs+=("${targets[0]} nostr-sender-only $c $(duration_for "$c" standalone)")
    [ "$w" = nostr ] && configs+=("${targets[0]} nostr-relay-verified $c $(duration_for "$c" standalone)")
    [ "$baselines" = 1 ] || continue
    for m in "${modes[@]}"; do
      suffix=""
      [ "$m" = cluster ] && suffix=":cluster"
      # The ceiling has nothing to reject, and the peer has no tiers or WebSocket: each
      # baseline runs where it means something.
      case "$w" in
        light | heavy | nostr) configs+=("quotas-off$suffix $w $c $(duration_for "$c" "$m")") ;;
      esac
      case "$w" in
        light | heavy) configs+=("fastify-rate-limit$suffix $w $c $(duration_for "$c" "$m")") ;;
      esac
    done
  done
done
if [ "$quick" = 1 ]; then
  # Quick keeps every client on both topologies for light (with and without leases); flood
  # on standalone; Nostr through glide and the ceiling; two of the three adaptive laws.
  kept=()
  for cfg in "${configs[@]}"; do
    case "$cfg" in
      *:cluster\ flood\ * | *:cluster\ nostr\ * | iovalkey\ nostr\ * | ioredis\ nostr\ *) ;;
      *+lease\ nostr\ *) ;;
      *\ adaptive-pid\ *) ;;
      *) kept+=("$cfg") ;;
    esac
  done
  configs=("${kept[@]}")
fi

# --- set up, then start what is not given -----------------------------------------------
user_relay_url="$relay_url"
setup
export SLUICE_RUN_DIR="$ROOT/.run/bench"
export SLUICE_SKIP_SETUP=1
[ -t 1 ] && export SLUICE_PROGRESS_TTY=1

RESULTS_DIR="$ROOT/results/$(results_stamp)"
mkdir -p "$RESULTS_DIR"
ln -sfn "$(basename "$RESULTS_DIR")" "$ROOT/results/latest"
LOG="$RESULTS_DIR/benchmark.log"
exec > >(tee -a "$LOG") 2>&1

own_valkey=0
cleanup() {
  stop_started
  [ "$own_valkey" = 0 ] || "${SLUICE[@]}" valkey stop --all >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

STANDALONE_PORT="${SLUICE_BENCH_STANDALONE_PORT:-6380}"
CLUSTER_BASE="${SLUICE_BENCH_CLUSTER_BASE:-7200}"
needs() { [[ " ${workloads[*]} " == *" $1 "* ]]; }
# The fleet benchmark runs on standalone whatever the chosen topologies.
if { [[ " ${modes[*]} " == *" standalone "* ]] || needs fleet || needs spike; } && [ -z "$valkey_standalone" ]; then
  say "starting Valkey standalone on $STANDALONE_PORT"
  own_valkey=1
  "${SLUICE[@]}" valkey start --port "$STANDALONE_PORT"
  valkey_standalone="127.0.0.1:$STANDALONE_PORT"
fi
if [[ " ${modes[*]} " == *" cluster "* ]] && [ -z "$valkey_cluster" ]; then
  say "starting a 6-node Valkey cluster on $CLUSTER_BASE-$((CLUSTER_BASE + 5))"
  own_valkey=1
  "${SLUICE[@]}" valkey start --cluster --base-port "$CLUSTER_BASE"
  valkey_cluster="127.0.0.1:$CLUSTER_BASE"
fi
if [ "$relay_impl" = nostr-rs-relay ]; then
  ensure_nostr_rs_relay
fi
if [ -z "$relay_url" ] && { needs light || needs flood; }; then
  start_relay relay-a 0 "$SLUICE_RUN_DIR/relay-light"
  relay_url="$RELAY_STARTED_URL"
  say "reference relay (light writes) at $relay_url"
fi
if [ -z "$heavy_relay_url" ] && needs heavy; then
  start_relay relay-a 500 "$SLUICE_RUN_DIR/relay-heavy"
  heavy_relay_url="$RELAY_STARTED_URL"
  say "reference relay (heavy writes: 500 sha256 rounds each) at $heavy_relay_url"
fi

# --- the session's record: session.json (read by the report) and README.md ---------------
relay_note="$relay_impl"
[ "$relay_impl" = nostr-rs-relay ] && relay_note+=" $("${SLUICE[@]}" bench relay-install --print-path)"
"${SLUICE[@]}" bench session --out-dir "$RESULTS_DIR" \
  --command "./scripts/run-all.sh ${original_args[*]}" \
  --set "python=$(.venv/bin/python --version | cut -d' ' -f2)" \
  --set "configurations=${#configs[@]}" \
  --set "runs each=$runs (interleaved in a shuffled order per round)" \
  --set "duration mode=$duration_mode" --set "concurrency=$concurrency" \
  --set "warm-up=${warmup}s" \
  --set "client identities=$keys, $distribution; write quota 6000 per 60 s per identity (nostr: 1000000, never reached); +lease: quota leases on" \
  --set "relay=$relay_note" \
  --set "nostr=every EVENT new (signed before each run by 1000 keys, never re-sent); a fresh relay per run; relay-alone measures the relay by itself" \
  --set "flood=90% of identities far over their limit (1 write per hour, spent before the warm-up)" \
  --set "Valkey=standalone ${valkey_standalone:-none}, cluster ${valkey_cluster:-none}; its version is in each run file" \
  --set "Valkey clients=the timeouts of each run file's clientSettings" \
  --set "machine=load generator, gateway, relay and Valkey share it: compare ratios within the run"

# --- the runs: each round runs every configuration once, in a shuffled order -------------
# The adaptive scenario is long and recorded as time series: it runs once per law.
n_once=0
for cfg in "${configs[@]}"; do [[ "$cfg" == *\ adaptive-* ]] && n_once=$((n_once + 1)); done
total=$(( (${#configs[@]} - n_once) * runs + n_once ))
[ "$total" -gt 0 ] || runs=0 # fleet alone: no configuration to run
k=0
failed_runs=0
bar() { # done total
  local width=30 filled
  filled=$(( $1 * width / $2 ))
  printf '[%s%s] %d/%d' "$(printf '%*s' "$filled" '' | tr ' ' '#')" \
    "$(printf '%*s' $((width - filled)) '' | tr ' ' '-')" "$1" "$2"
}
[ "$total" -eq 0 ] || say "${#configs[@]} configurations, $runs runs each (adaptive: one per law) = $total runs -> $RESULTS_DIR"
started_at=$(date +%s)
for run in $(seq 1 "$runs"); do
  mapfile -t order < <(printf '%s\n' "${configs[@]}" | shuf --random-source=<(yes "$seed-$run"))
  for cfg in "${order[@]}"; do
    [ -n "$cfg" ] || continue # no configurations (spike alone)
    read -r target wl conn dur <<<"$cfg"
    runs_of=$runs
    if [[ "$wl" == adaptive-* ]]; then
      [ "$run" = 1 ] || continue
      runs_of=1
    fi
    k=$((k + 1))
    say "$(bar "$k" "$total")  run $run/$runs  $target $wl ${conn}c ${dur}s"
    valkey="$valkey_standalone"
    [[ "$target" == *:cluster ]] && valkey="$valkey_cluster"
    # relay-alone uses no Valkey (its file records the version of whichever is running).
    [ "$target" = relay-alone ] && valkey="${valkey_standalone:-$valkey_cluster}"
    relay="$relay_url"
    [ "$wl" = heavy ] && relay="$heavy_relay_url"
    [[ "$wl" == adaptive-* ]] && relay=""
    # Nostr: a fresh relay per run (same state for relay-alone and every gateway), unless the
    # user named one with --relay.
    [[ "$wl" == nostr* ]] && [ -z "$user_relay_url" ] && relay=""
    set +e
    DURATION="$dur" CONNECTIONS="$conn" REQUEST_TYPE="$wl" RATE_LIMITER_TYPE="$target" \
      WARMUP="$warmup" RUN="$run" RUNS="$runs_of" KEYS="$keys" DISTRIBUTION="$distribution" \
      SEED="$seed" VALKEY_STANDALONE="$valkey" VALKEY_CLUSTER="$valkey" RELAY_URL="$relay" \
      RELAY_IMPL="$relay_impl" RATE="$([[ "$wl" == light || "$wl" == heavy || "$wl" == flood ]] && echo "$rate")" \
      RESULTS_DIR="$RESULTS_DIR" "$ROOT/scripts/run-benchmark.sh"
    rc=$?
    set -e
    [ "$rc" -eq 0 ] || failed_runs=$((failed_runs + 1))
  done
done
[ "$total" -eq 0 ] || say "runs finished in $(( $(date +%s) - started_at ))s; $failed_runs of $total failed (marked in their files and the report)"

fleet_failed=0
if needs fleet; then
  fleet_client="${targets[0]%%:*}"
  fleet_client="${fleet_client%%+*}"
  say "fleet: sticky, round-robin and headroom routing around a degraded node ($fleet_client, standalone)"
  "${SLUICE[@]}" bench fleet --valkey "$valkey_standalone" --valkey-client "$fleet_client" \
    --out "$RESULTS_DIR/fleet" || fleet_failed=1
  say "fleet: $RESULTS_DIR/fleet/fleet-bench.md"
fi

spike_failed=0
if needs spike; then
  say "spike benchmark (sluice bench spike): fast tick on and off -> $RESULTS_DIR/spike-bench.json"
  spike_valkey=()
  [ -n "$valkey_standalone" ] && spike_valkey=(--valkey "$valkey_standalone")
  "${SLUICE[@]}" bench spike "${spike_valkey[@]}" --out "$RESULTS_DIR" || spike_failed=1
fi

if [ "$total" -gt 0 ]; then
  say "writing the report"
  .venv/bin/python scripts/generate_report.py "$RESULTS_DIR"
  say "report: results/latest/report.html  csv: results/latest/summary.csv"
fi
[ "$fleet_failed" = 0 ] || die "the fleet benchmark failed (see above)"
[ "$spike_failed" = 0 ] || die "the spike benchmark failed (see above)"
