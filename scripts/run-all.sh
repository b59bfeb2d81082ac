#!/usr/bin/env bash
# The main command: runs the plan of `sluice bench plan` (every chosen client x topology x
# workload x concurrency, N runs each, interleaved) through ./scripts/run-benchmark.sh, then
# writes the HTML report and CSV. Installs what is missing, starts the Valkey (standalone, a
# 6-node cluster) and reference relays the plan needs unless addresses are given, and stops
# everything it started on every exit. What runs is the plan's business, not this script's.
set -euo pipefail
source "$(dirname "$0")/lib/common.sh"

usage() {
  cat <<USAGE
usage: ./scripts/run-all.sh [options]        (no options on a terminal: a menu)

  --quick                 each client x topology x workload (light, heavy, flood, nostr) once,
                          the Nostr variants, each adaptive law and each baseline once,
                          leases once per topology: 2 s runs (adaptive 10 s), no warm-up, 500
                          identities, about five minutes with set-up. Options given beside
                          it win (--quick --clients iovalkey: the same through iovalkey)
  --clients LIST          valkey-glide, iovalkey, ioredis, each optionally +lease (quota
                          leases on) and :cluster (e.g. iovalkey+lease:cluster), comma- or
                          space-separated; or a group: all | standalone | cluster | lease
                          (default all: the three clients without leases, both topologies)
  --workload W            light | heavy | both | flood | nostr | adaptive | fleet | spike | step |
                          everything, or oom, or a comma list of them (default both); nostr
                          holds its variants (nostr-sender-only, nostr-relay-verified,
                          nostr-gateway-verified, nostr-at-limit, nostr-long-tail: every event
                          from a new author; nostr-reads: REQs for pages of stored notes; also
                          named alone) and adaptive its laws (adaptive-none|pid|lead). fleet:
                          \`sluice bench fleet\` once (three relays, one degrades; sticky,
                          round-robin and headroom routing, 90 s each) through the first client
                          on standalone, into <results>/fleet/ (fleet-bench.json,
                          fleet-bench.md). spike: \`sluice bench spike\` (reaction time and peak
                          memory when a relay's memory jumps, the feed's fast tick on and off;
                          about four minutes, its own table). step: \`sluice bench step\` (each
                          law's step response to a 3x flood, a spike and a drain cut; about six
                          minutes, step-bench.json and step-bench.md). oom: \`sluice bench oom\`, the
                          relay inside a memory cgroup with a hard limit (root and a writable
                          cgroup needed), three arms x two floods, about 12 minutes (also with
                          --relay-impl nostr-rs-relay); not part of everything
  --duration-mode M       dynamic (120 s up to 100 connections, 180 s above, +30 s for cluster)
                          | fixed30 | fixed120 | custom:N (default dynamic)
  --concurrency "N ..."   connection counts (default "50 100")
  --runs N                runs per configuration (default 3)
  --warmup S              unrecorded seconds before each run (default 3)
  --keys N                client identities in the load (default 10000)
  --distribution D        uniform | zipf (default uniform)
  --no-baselines          skip quotas-off and the @fastify/rate-limit peer (Nostr keeps
                          relay-alone: it is what "through the gateway / relay alone" divides by)
  --relay-impl R          reference | nostr-rs-relay | khatru (default reference). nostr-rs-relay
                          is built from crates.io (cargo and protoc), khatru from relays/khatru
                          with Go modules (go 1.24+), each on first use (cached under
                          \${XDG_CACHE_HOME:-~/.cache}/sluice/relays); both speak Nostr only:
                          it needs --workload nostr or oom
  --valkey-standalone H:P use a running standalone Valkey instead of starting one
  --valkey-cluster H:P    use a running cluster (any node) instead of starting one
  --relay URL             use a running relay for light/flood (heavy: --heavy-relay URL,
                          which must run with --work-iterations 500); Nostr runs start a fresh
                          relay each, unless this is given
  --rate N                HTTP workloads: offer N requests/s per run (open loop, latency from
                          each request's intended send time) instead of the closed loop
  --seed N                seed of the run order, event pool and key draw (default 1)
  --workers N|auto        gateway processes in every run (default 1; auto: one per core the
                          gateway may use, as it ships)
  --cpus LIST             single box: every run pins its relay, gateway and Valkey to these
                          cores with taskset (e.g. 0,1); recorded in each run file
  --load-cpus LIST        pin the load generator to these cores (default: not pinned)
  --help                  this text

Results: results/<YYYYMMDD_HHMMSS>/ (one JSON per run, plan.jsonl, benchmark.log, README.md,
report.html, summary.csv) and the results/latest link (results/: \$SLUICE_RESULTS_ROOT if set).
SLUICE_SKIP_SETUP=1: no install or build (done already). Ports of the Valkey it starts:
\$SLUICE_BENCH_STANDALONE_PORT (6380), \$SLUICE_BENCH_CLUSTER_BASE (7200-7205).
\`node dist/src/cli.js bench plan\` takes the same options and prints the runs, running none.
USAGE
}

# Unset: the plan's default (sluice bench plan; --quick has its own). The plan checks them.
quick=0
clients=""
workload=""
duration_mode=""
concurrency=""
runs=""
warmup=""
keys=""
distribution="uniform"
baselines=1
seed=1
rate=""
workers=""
cpus=""
load_cpus=""
valkey_standalone=""
valkey_cluster=""
relay_url=""
heavy_relay_url=""
relay_impl="reference"

need() { [ "$#" -ge 2 ] && [ -n "$2" ] || die "$1 needs a value (see --help)"; }

menu() {
  local choice
  echo "sluice benchmark: choose (Enter keeps the default)"
  echo " 1) quick: each client x topology x workload once, short runs, about five minutes"
  echo " 2) standard: light + heavy, 30 s runs, 50 and 100 connections, 3 runs"
  echo " 3) full: light + heavy + flood + nostr + adaptive + fleet + spike + step, dynamic durations"
  echo " 4) custom"
  echo " 5) oom: the reference relay in a memory cgroup with a hard limit, under floods (root)"
  read -r -p "mode [1]: " choice
  case "${choice:-1}" in
    1) quick=1 ;;
    2) duration_mode=fixed30 ;;
    3) workload=everything ;;
    4)
      read -r -p "clients (all|standalone|cluster|lease|list, e.g. iovalkey+lease:cluster) [all]: " clients
      read -r -p "workload (light|heavy|both|flood|nostr|adaptive|fleet|spike|step|everything|oom) [both]: " workload
      read -r -p "duration mode (dynamic|fixed30|fixed120|custom:N) [dynamic]: " duration_mode
      read -r -p "concurrency [50 100]: " concurrency
      read -r -p "runs [3]: " runs
      ;;
    5) workload=oom ;;
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
    --workers) need "$@"; workers="$2"; shift ;;
    --cpus) need "$@"; cpus="$2"; shift ;;
    --load-cpus) need "$@"; load_cpus="$2"; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown option: $1" ;;
  esac
  shift
done
[ "$relay_impl" = reference ] || [ -z "$relay_url" ] \
  || die "--relay names a running reference relay; $relay_impl is started per run"

# The plan's options: those given (sluice bench plan has the defaults, and checks them all).
plan_args=(--relay-impl "$relay_impl" --seed "$seed")
[ "$quick" = 0 ] || plan_args+=(--quick)
[ "$baselines" = 1 ] || plan_args+=(--no-baselines)
for opt in clients workload duration_mode concurrency runs warmup keys rate; do
  [ -z "${!opt}" ] || plan_args+=("--${opt//_/-}" "${!opt}")
done

# --- set up, plan, then start what the plan needs and is not given -----------------------
user_relay_url="$relay_url"
# A mistake in the options fails now rather than after the build, when there is a build.
[ ! -f dist/src/cli.js ] || "${SLUICE[@]}" bench plan "${plan_args[@]}" >/dev/null
[ "${SLUICE_SKIP_SETUP:-0}" = 1 ] || setup
# The runs in order (each round shuffled by the seed), as tab-separated lines: see
# planLines in src/bench/run/plan.ts. The session line first, then runs, then commands.
plan_text="$("${SLUICE[@]}" bench plan "${plan_args[@]}" --tsv)" || exit 1
run_lines=()
plan_commands=()
while IFS= read -r line; do
  IFS=$'\t' read -r -a f <<<"$line"
  case "${f[0]}" in
    session) for kv in "${f[@]:1}"; do printf -v "plan_${kv%%=*}" '%s' "${kv#*=}"; done ;;
    run) run_lines+=("$line") ;;
    command) plan_commands+=("${f[1]}"); [ "${f[1]}" != fleet ] || fleet_client="${f[2]}" ;;
  esac
done <<<"$plan_text"
needs() { [[ " $plan_needs ${plan_commands[*]} " == *" $1 "* ]]; }
export SLUICE_RUN_DIR="$ROOT/.run/bench"
export SLUICE_SKIP_SETUP=1
[ -t 1 ] && export SLUICE_PROGRESS_TTY=1

RESULTS_ROOT="${SLUICE_RESULTS_ROOT:-$ROOT/results}"
RESULTS_DIR="$RESULTS_ROOT/$(results_stamp)"
mkdir -p "$RESULTS_DIR"
ln -sfn "$(basename "$RESULTS_DIR")" "$RESULTS_ROOT/latest"
LOG="$RESULTS_DIR/benchmark.log"
exec > >(tee -a "$LOG") 2>&1
# The plan as JSON lines, beside the runs it made (what \`sluice bench plan\` prints).
"${SLUICE[@]}" bench plan "${plan_args[@]}" >"$RESULTS_DIR/plan.jsonl"

own_valkey=0
cleanup() {
  stop_started
  [ "$own_valkey" = 0 ] || "${SLUICE[@]}" valkey stop --all >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

STANDALONE_PORT="${SLUICE_BENCH_STANDALONE_PORT:-6380}"
CLUSTER_BASE="${SLUICE_BENCH_CLUSTER_BASE:-7200}"
if needs standalone && [ -z "$valkey_standalone" ]; then
  say "starting Valkey standalone on $STANDALONE_PORT"
  own_valkey=1
  "${SLUICE[@]}" valkey start --port "$STANDALONE_PORT"
  valkey_standalone="127.0.0.1:$STANDALONE_PORT"
fi
if needs cluster && [ -z "$valkey_cluster" ]; then
  say "starting a 6-node Valkey cluster on $CLUSTER_BASE-$((CLUSTER_BASE + 5))"
  own_valkey=1
  "${SLUICE[@]}" valkey start --cluster --base-port "$CLUSTER_BASE"
  valkey_cluster="127.0.0.1:$CLUSTER_BASE"
fi
case "$relay_impl" in
  nostr-rs-relay) ensure_nostr_rs_relay ;;
  khatru) ensure_khatru_relay ;;
esac
if [ -z "$relay_url" ] && needs relay-light; then
  start_relay relay-a 0 "$SLUICE_RUN_DIR/relay-light"
  relay_url="$RELAY_STARTED_URL"
  say "reference relay (light writes) at $relay_url"
fi
if [ -z "$heavy_relay_url" ] && needs relay-heavy; then
  start_relay relay-a 500 "$SLUICE_RUN_DIR/relay-heavy"
  heavy_relay_url="$RELAY_STARTED_URL"
  say "reference relay (heavy writes: 500 sha256 rounds each) at $heavy_relay_url"
fi

# --- the session's record: session.json (read by the report) and README.md ---------------
pinning="relay, gateway and Valkey not pinned"
[ -z "$cpus" ] || pinning="relay, gateway and Valkey pinned to CPUs $cpus (taskset)"
pinning+="; load generator ${load_cpus:+pinned to CPUs $load_cpus}"
[ -n "$load_cpus" ] || pinning+="not pinned"
relay_note="$relay_impl"
[ "$relay_impl" = reference ] \
  || relay_note+=" $("${SLUICE[@]}" bench relay-install --relay-impl "$relay_impl" --print-path)"
"${SLUICE[@]}" bench session --out-dir "$RESULTS_DIR" \
  --command "./scripts/run-all.sh ${original_args[*]}" \
  --set "python=$(.venv/bin/python --version | cut -d' ' -f2)" \
  --set "configurations=$plan_configurations" \
  --set "runs each=$plan_runs (interleaved in a shuffled order per round)" \
  --set "duration mode=$plan_durationMode" --set "concurrency=$plan_concurrency" \
  --set "warm-up=${plan_warmup}s" \
  --set "client identities=$plan_keys, $distribution; write quota 6000 per 60 s per identity (nostr: 1000000, never reached); +lease: quota leases on" \
  --set "relay=$relay_note" \
  --set "nostr=every EVENT new (signed before each run by 1000 keys, never re-sent; nostr-long-tail: each by a key of its own; nostr-reads: REQs for pages of 50 of 2000 notes stored before the run); a fresh relay per run; relay-alone measures the relay by itself" \
  --set "gateway workers asked=${workers:-1} (each run: its gatewayWorkers)" \
  --set "single box=$pinning" \
  --set "flood=90% of identities far over their limit (1 write per hour, spent before the warm-up)" \
  --set "Valkey=standalone ${valkey_standalone:-none}, cluster ${valkey_cluster:-none}; its version is in each run file" \
  --set "Valkey clients=the timeouts of each run file's clientSettings" \
  --set "machine=load generator, gateway, relay and Valkey share it: compare ratios within the run"

# --- the runs, as the plan orders them (each round shuffled; adaptive once per law) -------
total="$plan_total"
k=0
failed_runs=0
bar() { # done total
  local width=30 filled
  filled=$(( $1 * width / $2 ))
  printf '[%s%s] %d/%d' "$(printf '%*s' "$filled" '' | tr ' ' '#')" \
    "$(printf '%*s' $((width - filled)) '' | tr ' ' '-')" "$1" "$2"
}
[ "$total" -eq 0 ] || say "$plan_configurations configurations, $plan_runs runs each (adaptive: one per law) = $total runs -> $RESULTS_DIR"
started_at=$(date +%s)
for line in "${run_lines[@]}"; do
  # run, the session's Valkey and relay it uses, its label, then run-benchmark.sh's settings.
  IFS=$'\t' read -r -a f <<<"$line"
  k=$((k + 1))
  say "$(bar "$k" "$total")  ${f[3]}"
  valkey="$valkey_standalone"
  [ "${f[1]}" = cluster ] && valkey="$valkey_cluster"
  case "${f[2]}" in
    light) relay="$relay_url" ;;
    heavy) relay="$heavy_relay_url" ;;
    per-run) relay="$user_relay_url" ;; # Nostr: a fresh relay per run, unless --relay names one
    *) relay="" ;;
  esac
  set +e
  env -u RATE -u FRESH_EVENTS_PER_SEC "${f[@]:4}" DISTRIBUTION="$distribution" SEED="$seed" \
    VALKEY_STANDALONE="$valkey" VALKEY_CLUSTER="$valkey" RELAY_URL="$relay" \
    RELAY_IMPL="$relay_impl" WORKERS="$workers" CPUS="$cpus" LOAD_CPUS="$load_cpus" \
    RESULTS_DIR="$RESULTS_DIR" "$ROOT/scripts/run-benchmark.sh"
  rc=$?
  set -e
  [ "$rc" -eq 0 ] || failed_runs=$((failed_runs + 1))
done
[ "$total" -eq 0 ] || say "runs finished in $(( $(date +%s) - started_at ))s; $failed_runs of $total failed (marked in their files and the report)"

fleet_failed=0
if needs fleet; then
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

step_failed=0
if needs step; then
  say "step response (sluice bench step): each law x flood, spike, drain cut -> $RESULTS_DIR/step-bench.md"
  step_valkey=()
  [ -n "$valkey_standalone" ] && step_valkey=(--valkey "$valkey_standalone")
  "${SLUICE[@]}" bench step "${step_valkey[@]}" --out "$RESULTS_DIR" || step_failed=1
fi

# The relay in a memory cgroup with a hard limit: its own JSON and table (oom-<relay>.*).
oom_failed=0
if needs oom; then
  say "sluice bench oom ($relay_impl): three arms x two floods in a memory cgroup"
  "${SLUICE[@]}" bench oom --valkey "$valkey_standalone" --relay-impl "$relay_impl" \
    --out-dir "$RESULTS_DIR" || oom_failed=1
fi

# The report also draws the closed-loop benchmarks' memory / target and m over time.
if [ "$total" -gt 0 ] || [ "${#plan_commands[@]}" -gt 0 ]; then
  say "writing the report"
  .venv/bin/python scripts/generate_report.py "$RESULTS_DIR"
  say "report: $RESULTS_DIR/report.html  csv: $RESULTS_DIR/summary.csv"
fi
[ "$fleet_failed" = 0 ] || die "the fleet benchmark failed (see above)"
[ "$spike_failed" = 0 ] || die "the spike benchmark failed (see above)"
[ "$step_failed" = 0 ] || die "the step benchmark failed (see above)"
[ "$oom_failed" = 0 ] || die "sluice bench oom failed (see above)"
