# Shared set-up for scripts/*.sh: install what is missing, build, and helpers to start and
# stop the embedded Valkey. Sourced, not run.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

PYTHON="${PYTHON:-python3}"
SLUICE=(node "$ROOT/dist/src/cli.js")

say() { printf '\033[1m==>\033[0m %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

require_tools() {
  command -v node >/dev/null || die "Node.js 20+ is required (node not found on PATH)"
  command -v npm >/dev/null || die "npm is required (it ships with Node.js)"
  local major
  major="$(node -p 'process.versions.node.split(".")[0]')"
  [ "$major" -ge 20 ] || die "Node.js 20+ is required, found $(node --version)"
  command -v "$PYTHON" >/dev/null || die "Python 3.11+ is required ($PYTHON not found; set PYTHON=...)"
  "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
    || die "Python 3.11+ is required, found $("$PYTHON" --version 2>&1)"
}

# npm ci when node_modules is absent or older than the lockfile.
ensure_node_modules() {
  if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    say "installing Node dependencies (npm ci)"
    npm ci --no-audit --no-fund --loglevel=error
  fi
}

# A .venv from requirements.txt, rebuilt when requirements.txt changes.
ensure_venv() {
  local stamp=.venv/.requirements.sha256 want
  want="$(sha256sum requirements.txt | cut -d' ' -f1)"
  if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    say "creating the Python environment (.venv from requirements.txt)"
    [ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
    echo "$want" > "$stamp"
  fi
}

# Headless Chromium for the report's browser test: Debian's package, installed when missing.
ensure_chromium() {
  export CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
  [ -x "$CHROMIUM" ] && return 0
  command -v apt-get >/dev/null || die "the report test needs Chromium: set CHROMIUM=/path/to/chromium"
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo -n)
  say "installing Chromium (Debian package) for the report's browser test"
  "${sudo[@]}" apt-get update -qq >/dev/null \
    && DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq chromium >/dev/null \
    || die "could not install Chromium (apt-get install chromium); install it or set CHROMIUM"
  [ -x "$CHROMIUM" ] || die "Chromium installed but $CHROMIUM is missing; set CHROMIUM"
}

# Prometheus and promtool (Debian's prometheus package) for test/integration/prometheus.test.ts: the
# shipped rules and a real scrape. Installed when missing; where it cannot be, the test
# skips with the reason (a warning here, not a failure: the rest of the suite still runs).
ensure_prometheus() {
  command -v promtool >/dev/null && command -v prometheus >/dev/null && return 0
  if ! command -v apt-get >/dev/null; then
    say "warning: no apt-get to install Prometheus: test/integration/prometheus.test.ts will skip"
    return 0
  fi
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo -n)
  say "installing Prometheus (Debian package: prometheus, promtool) for the rules and scrape tests"
  "${sudo[@]}" apt-get update -qq >/dev/null \
    && DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends prometheus >/dev/null \
    || say "warning: could not install prometheus (apt-get install prometheus): test/integration/prometheus.test.ts will skip"
}

have_cargo() { command -v cargo >/dev/null || [ -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" ]; }
# go on PATH, $GO, or the official tarball's place (the same places the harness looks).
have_go() { command -v go >/dev/null || [ -x "${GO:-}" ] || [ -x /usr/local/go/bin/go ]; }

# nostr-rs-relay (pinned) for --relay-impl nostr-rs-relay: built once from crates.io into
# ${XDG_CACHE_HOME:-~/.cache}/sluice/relays (several minutes). Needs cargo (rustup) and protoc
# (Debian's protobuf-compiler, installed when missing; or set PROTOC). Call after build.
ensure_nostr_rs_relay() {
  local bin
  bin="$("${SLUICE[@]}" bench relay-install --print-path)"
  [ -x "$bin" ] && return 0
  have_cargo \
    || die "nostr-rs-relay is built from crates.io with cargo: install Rust (https://rustup.rs), then run again. The commands: $("${SLUICE[@]}" bench relay-install --print-command)"
  if ! command -v protoc >/dev/null && [ ! -x "${PROTOC:-}" ]; then
    command -v apt-get >/dev/null || die "building nostr-rs-relay needs protoc: install protobuf-compiler or set PROTOC"
    local sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo -n)
    say "installing protoc (Debian's protobuf-compiler) to build nostr-rs-relay"
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq protobuf-compiler >/dev/null \
      || { "${sudo[@]}" apt-get update -qq >/dev/null \
        && DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq protobuf-compiler >/dev/null; } \
      || die "could not install protobuf-compiler; install it or set PROTOC=/path/to/protoc"
  fi
  say "building nostr-rs-relay from crates.io (once, several minutes) into $(dirname "$(dirname "$bin")")"
  "${SLUICE[@]}" bench relay-install >/dev/null
}

# The khatru relay (relays/khatru) for --relay-impl khatru: built once with go (khatru and the
# badger eventstore from the Go module proxy, no cgo) into the same cache, keyed by khatru's
# version and the source's hash (a minute or two). Needs Go 1.24 or later. Call after build.
ensure_khatru_relay() {
  local bin
  bin="$("${SLUICE[@]}" bench relay-install --relay-impl khatru --print-path)"
  [ -x "$bin" ] && return 0
  have_go \
    || die "the khatru relay is built with go: install Go 1.24 or later (https://go.dev/dl), then run again. The command: $("${SLUICE[@]}" bench relay-install --relay-impl khatru --print-command)"
  say "building the khatru relay with Go modules (once, a minute or two) into $(dirname "$bin")"
  "${SLUICE[@]}" bench relay-install --relay-impl khatru >/dev/null
}

# tsc when a source is newer than the last build here (a fresh clone, an edit, a checkout):
# a full build of src and test takes half a minute on two cores, a check a moment.
build() {
  local stamp=dist/.build-stamp
  if [ -f "$stamp" ] && [ -z "$(find src test tsconfig.json package-lock.json -newer "$stamp" -print -quit)" ]; then
    return 0
  fi
  say "building (tsc)"
  mkdir -p dist
  touch "$stamp.next" # before tsc reads the sources: an edit during the build is newer
  npm run --silent build
  mv "$stamp.next" "$stamp"
}

setup() {
  require_tools
  ensure_node_modules
  ensure_venv
  build
}

# Background processes this script started (by PID), stopped by stop_started.
STARTED_PIDS=()

# start_relay NODE_ID WORK_ITERATIONS DATA_DIR: a reference relay on a free loopback port;
# sets RELAY_STARTED_URL once it answers, and its PID joins STARTED_PIDS. (Not for $(...):
# a subshell would keep the PID to itself.)
start_relay() {
  local id="$1" work="$2" dir="$3" log="$3.log" url=""
  mkdir -p "$dir"
  "${SLUICE[@]}" relay --port 0 --node-id "$id" --data-dir "$dir" --fresh \
    --work-iterations "$work" >"$log" 2>&1 &
  STARTED_PIDS+=($!)
  for _ in $(seq 1 100); do
    url="$(sed -n 's/^{"ready":"relay","url":"\(http:[^"]*\)".*/\1/p' "$log" | head -1)"
    [ -n "$url" ] && { RELAY_STARTED_URL="$url"; return 0; }
    kill -0 "${STARTED_PIDS[-1]}" 2>/dev/null || break
    sleep 0.1
  done
  cat "$log" >&2
  die "relay $id did not start"
}

stop_started() {
  local pid
  for pid in "${STARTED_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${STARTED_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  STARTED_PIDS=()
}

# UTC stamp for results/<YYYYMMDD_HHMMSS>.
results_stamp() { date -u +%Y%m%d_%H%M%S; }
