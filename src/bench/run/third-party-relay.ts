/**
 * A relay that users actually run, for the benchmark: nostr-rs-relay, built from crates.io on
 * first use (the pinned crate from crates.io, its lockfile with one fix, `cargo install
 * --locked`) into a cache outside the repository,
 * then started per run with its own config.toml (loopback, a free port, a fresh data
 * directory, no limit that could throttle the load) and stopped by its PID.
 *
 * The cache: `$SLUICE_RELAY_CACHE`, else `${XDG_CACHE_HOME:-~/.cache}/sluice/relays`, holding
 * `nostr-rs-relay-<version>/bin/nostr-rs-relay`.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freeLoopbackPort } from '../../harness/ports.js';
import { onPath, relayCacheRoot, startRelayProcess } from './relay-process.js';
import type { RelayStartOptions, ThirdPartyRelay } from './relay-process.js';

export { relayCacheRoot } from './relay-process.js';
export type { ThirdPartyRelay } from './relay-process.js';

/** The newest nostr-rs-relay on crates.io when this was written (and it builds here). */
export const NOSTR_RS_RELAY_VERSION = '0.8.12';

/** Where the pinned build lives (`--root` of cargo install). */
export function nostrRsRelayRoot(env: NodeJS.ProcessEnv = process.env): string {
  return path.join(relayCacheRoot(env), `nostr-rs-relay-${NOSTR_RS_RELAY_VERSION}`);
}

export function nostrRsRelayBinary(env: NodeJS.ProcessEnv = process.env): string {
  return path.join(nostrRsRelayRoot(env), 'bin', 'nostr-rs-relay');
}

/** The crate as crates.io serves it, and its sha256 (checked before anything is built). */
const CRATE_URL = `https://static.crates.io/crates/nostr-rs-relay/nostr-rs-relay-${NOSTR_RS_RELAY_VERSION}.crate`;
const CRATE_SHA256 = '79642781fa96050951c1821e047fb97ab98158a4ee2cd759f587f834dd84ec86';
/**
 * The crate's own Cargo.lock pins time 0.3.25, which no longer compiles on Rust 1.80 and later
 * (E0282 in format_description); 0.3.36 is the first fixed release. Only this entry (and what
 * it pulls in: deranged, serde, time-core, time-macros, num-conv, powerfmt) moves.
 */
const LOCK_UPDATES: [string, string][] = [['time@0.3.25', '0.3.36']];

/** The source tree the binary is built from: the crate, with LOCK_UPDATES applied. */
function sourceDir(env: NodeJS.ProcessEnv): string {
  return path.join(nostrRsRelayRoot(env), 'build', `nostr-rs-relay-${NOSTR_RS_RELAY_VERSION}`);
}

/** The exact commands that build the cached binary (what ensureNostrRsRelay runs). */
export function installCommand(cargo = 'cargo', env: NodeJS.ProcessEnv = process.env): string {
  const root = nostrRsRelayRoot(env);
  const src = sourceDir(env);
  return [
    `mkdir -p ${path.dirname(src)}`,
    `curl -sSfL ${CRATE_URL} | tar -xz -C ${path.dirname(src)}`,
    ...LOCK_UPDATES.map(
      ([spec, v]) => `${cargo} update --manifest-path ${src}/Cargo.toml -p ${spec} --precise ${v}`,
    ),
    `${cargo} install --locked --root ${root} --path ${src}`,
    `rm -rf ${path.dirname(src)}`,
  ].join(' && ');
}

/** cargo on PATH, else rustup's default place. */
export function findCargo(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const home = env.CARGO_HOME || path.join(os.homedir(), '.cargo');
  return onPath('cargo', env) ?? [path.join(home, 'bin', 'cargo')].find((f) => existsSync(f));
}

/** protoc, which nostr-rs-relay's build (tonic-build, for its gRPC hook) needs. */
export function findProtoc(env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (env.PROTOC && existsSync(env.PROTOC)) return env.PROTOC;
  return onPath('protoc', env);
}

/**
 * The cached binary, built first when missing (several minutes, once: the caller is told).
 * Throws with the exact commands when cargo or protoc is missing.
 */
export async function ensureNostrRsRelay(
  log: (line: string) => void,
  env: NodeJS.ProcessEnv = process.env,
): Promise<string> {
  const binary = nostrRsRelayBinary(env);
  if (existsSync(binary)) return binary;
  const cargo = findCargo(env);
  if (!cargo) {
    throw new Error(
      `nostr-rs-relay ${NOSTR_RS_RELAY_VERSION} is not built yet (${binary} is missing) and cargo ` +
        `was not found: install Rust (https://rustup.rs), then run: ${installCommand('cargo', env)}`,
    );
  }
  const protoc = findProtoc(env);
  if (!protoc) {
    throw new Error(
      `building nostr-rs-relay needs protoc: apt-get install protobuf-compiler (or set PROTOC), ` +
        `then run: ${installCommand(cargo, env)}`,
    );
  }
  log(
    `building nostr-rs-relay ${NOSTR_RS_RELAY_VERSION} from crates.io into ${nostrRsRelayRoot(env)} ` +
      `(once; several minutes): ${installCommand(cargo, env)}`,
  );
  const t0 = Date.now();
  const src = sourceDir(env);
  const run = (args: string[], what: string) => {
    // cargo's progress goes to stderr, with the run's log; stdout keeps the result line.
    const res = spawnSync(cargo, args, {
      env: { ...env, PROTOC: protoc },
      stdio: ['ignore', 2, 2],
    });
    if (res.status !== 0) {
      throw new Error(
        `${what} failed (${res.error?.message ?? `exit ${res.status}`}); the commands are: ` +
          installCommand(cargo, env),
      );
    }
  };
  // Always from the crate as published: LOCK_UPDATES apply to its own Cargo.lock.
  rmSync(src, { recursive: true, force: true });
  await fetchCrate(src);
  for (const [spec, version] of LOCK_UPDATES) {
    run(
      ['update', '--manifest-path', path.join(src, 'Cargo.toml'), '-p', spec, '--precise', version],
      `cargo update -p ${spec}`,
    );
  }
  run(
    ['install', '--locked', '--root', nostrRsRelayRoot(env), '--path', src],
    'building nostr-rs-relay',
  );
  if (!existsSync(binary)) throw new Error(`cargo install left no ${binary}`);
  // `cargo install --path` builds in the source's target/ (over 1 GB): only bin/ is kept.
  rmSync(path.dirname(src), { recursive: true, force: true });
  log(`built nostr-rs-relay in ${Math.round((Date.now() - t0) / 1000)} s: ${binary}`);
  return binary;
}

/** The pinned crate from crates.io, checked against its sha256, unpacked next to `src`. */
async function fetchCrate(src: string): Promise<void> {
  const res = await fetch(CRATE_URL);
  if (!res.ok) throw new Error(`${CRATE_URL} answered ${res.status}`);
  const bytes = Buffer.from(await res.arrayBuffer());
  const sum = createHash('sha256').update(bytes).digest('hex');
  if (sum !== CRATE_SHA256) {
    throw new Error(`${CRATE_URL} has sha256 ${sum}, expected ${CRATE_SHA256}`);
  }
  mkdirSync(path.dirname(src), { recursive: true });
  const untar = spawnSync('tar', ['-xz', '-C', path.dirname(src)], { input: bytes });
  if (untar.status !== 0 || !existsSync(path.join(src, 'Cargo.toml'))) {
    throw new Error(
      `could not unpack ${CRATE_URL}: ${untar.stderr?.toString() || untar.error?.message}`,
    );
  }
}

/**
 * config.toml for a benchmark: loopback only, SQLite in `dataDir`, and every limit that could
 * throttle or refuse the load off or far above it (messages_per_sec unset is "no limit";
 * event sizes at 512 KiB, above the gateway's frame limit).
 */
export function nostrRsRelayConfig(
  port: number,
  dataDir: string,
  opts: Pick<RelayStartOptions, 'auth'> = {},
): string {
  return `# Written by sluice bench for one run.
[info]
relay_url = ${JSON.stringify(opts.auth?.relayUrl ?? `ws://127.0.0.1:${port}/`)}
name = "sluice-bench nostr-rs-relay"
description = "benchmark relay"

[database]
engine = "sqlite"
data_directory = ${JSON.stringify(dataDir)}

[network]
address = "127.0.0.1"
port = ${port}

[options]
# Events are dated when they are signed; nothing is refused for its timestamp.

[limits]
# messages_per_sec and subscriptions_per_min unset: no rate limit.
max_event_bytes = 524288
max_ws_message_bytes = 524288
max_ws_frame_bytes = 524288
event_persist_buffer = 16384
broadcast_buffer = 16384

[authorization]
nip42_auth = ${opts.auth ? 'true' : 'false'}

[verified_users]
mode = "disabled"
`;
}

/** Start nostr-rs-relay in `workDir` and wait (with a deadline) until it accepts a WebSocket. */
export async function startNostrRsRelay(
  workDir: string,
  log: (line: string) => void,
  env: NodeJS.ProcessEnv = process.env,
  opts: RelayStartOptions = {},
): Promise<ThirdPartyRelay> {
  const binary = await ensureNostrRsRelay(log, env);
  const dataDir = path.join(workDir, 'nostr-rs-relay-data');
  mkdirSync(dataDir, { recursive: true });
  const port = opts.port ?? (await freeLoopbackPort());
  const configFile = path.join(workDir, 'nostr-rs-relay.toml');
  writeFileSync(configFile, nostrRsRelayConfig(port, dataDir, opts));
  return startRelayProcess({
    name: 'nostr-rs-relay',
    nodeId: `nostr-rs-relay-${NOSTR_RS_RELAY_VERSION}`,
    binary,
    args: ['--config', configFile, '--db', dataDir],
    // Warnings only: per-connection info lines would be part of what is measured.
    env: { ...env, RUST_LOG: env.SLUICE_NOSTR_RS_RELAY_LOG ?? 'warn' },
    workDir,
    logFile: path.join(workDir, 'nostr-rs-relay.log'),
    port,
    cpus: opts.cpus,
    cgroupProcs: opts.cgroupProcs,
  });
}
