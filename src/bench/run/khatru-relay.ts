/**
 * A second relay that users run, for the benchmark and the tests in front of a third-party
 * relay: a minimal relay on khatru (relays/khatru in this repository: khatru's own EVENT
 * pipeline over the pure-Go badger eventstore), built with `go build` from the Go module proxy
 * on first use (no cgo) into the relay cache, keyed by khatru's version and the hash of the
 * source, then started per run on loopback with a fresh data directory and stopped by its PID.
 *
 * The cache: `relayCacheRoot()/khatru-<version>-<hash>/khatru-relay`.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../../harness/paths.js';
import { freeLoopbackPort } from '../../harness/ports.js';
import { onPath, relayCacheRoot, startRelayProcess } from './relay-process.js';
import type { RelayStartOptions, ThirdPartyRelay } from './relay-process.js';

/** The relay's Go source: its go.mod pins khatru, go.sum pins every module. */
export const KHATRU_SOURCE = path.join(PROJECT_ROOT, 'relays', 'khatru');
const SOURCE_FILES = ['go.mod', 'go.sum', 'main.go'];
/** Where `go` is when it is not on PATH (the official tarball's place). */
const GO_FALLBACK = '/usr/local/go/bin/go';

/** khatru's version, as go.mod requires it. */
export function khatruVersion(source = KHATRU_SOURCE): string {
  const mod = readFileSync(path.join(source, 'go.mod'), 'utf8');
  const version = /^\s*github\.com\/fiatjaf\/khatru\s+(v\S+)/m.exec(mod)?.[1];
  if (!version) throw new Error(`${source}/go.mod does not require github.com/fiatjaf/khatru`);
  return version;
}

/** The first 12 hex of the sha256 of the source files: a changed source is a new build. */
export function khatruSourceHash(source = KHATRU_SOURCE): string {
  const hash = createHash('sha256');
  for (const file of SOURCE_FILES) {
    hash
      .update(`${file}\0`)
      .update(readFileSync(path.join(source, file)))
      .update('\0');
  }
  return hash.digest('hex').slice(0, 12);
}

export function khatruRelayBinary(env: NodeJS.ProcessEnv = process.env): string {
  const dir = `khatru-${khatruVersion()}-${khatruSourceHash()}`;
  return path.join(relayCacheRoot(env), dir, 'khatru-relay');
}

/** `go` from $GO, PATH, or the official tarball's place. */
export function findGo(env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (env.GO && existsSync(env.GO)) return env.GO;
  return onPath('go', env) ?? (existsSync(GO_FALLBACK) ? GO_FALLBACK : undefined);
}

/** The exact command that builds the cached binary (what ensureKhatruRelay runs). */
export function khatruBuildCommand(go = 'go', env: NodeJS.ProcessEnv = process.env): string {
  return (
    `cd ${KHATRU_SOURCE} && CGO_ENABLED=0 ${go} build -mod=readonly -trimpath ` +
    `-o ${khatruRelayBinary(env)} .`
  );
}

/**
 * The cached binary, built first when missing (a minute or two on two cores, once: the caller
 * is told). Throws with the exact command when Go is missing or the build fails.
 */
export function ensureKhatruRelay(
  log: (line: string) => void,
  env: NodeJS.ProcessEnv = process.env,
): string {
  const binary = khatruRelayBinary(env);
  if (existsSync(binary)) return binary;
  const go = findGo(env);
  if (!go) {
    throw new Error(
      `the khatru relay is not built yet (${binary} is missing) and go was not found: ` +
        `install Go 1.24 or later (https://go.dev/dl), then run: ${khatruBuildCommand('go', env)}`,
    );
  }
  log(
    `building the khatru relay (khatru ${khatruVersion()}) with Go modules into ` +
      `${path.dirname(binary)} (once): ${khatruBuildCommand(go, env)}`,
  );
  const t0 = Date.now();
  mkdirSync(path.dirname(binary), { recursive: true });
  // Built beside its place and renamed: a concurrent run never starts half a binary.
  const partial = `${binary}.${process.pid}.partial`;
  const res = spawnSync(go, ['build', '-mod=readonly', '-trimpath', '-o', partial, '.'], {
    cwd: KHATRU_SOURCE,
    env: { ...env, CGO_ENABLED: '0' },
    // go's progress and errors go to stderr, with the run's log.
    stdio: ['ignore', 2, 2],
  });
  if (res.status !== 0 || !existsSync(partial)) {
    rmSync(partial, { force: true });
    throw new Error(
      `building the khatru relay failed (${res.error?.message ?? `exit ${res.status}`}); ` +
        `the command is: ${khatruBuildCommand(go, env)}`,
    );
  }
  renameSync(partial, binary);
  log(`built the khatru relay in ${Math.round((Date.now() - t0) / 1000)} s: ${binary}`);
  return binary;
}

/** Start the khatru relay in `workDir` and wait (with a deadline) until it accepts a WebSocket. */
export async function startKhatruRelay(
  workDir: string,
  log: (line: string) => void,
  env: NodeJS.ProcessEnv = process.env,
  opts: RelayStartOptions = {},
): Promise<ThirdPartyRelay> {
  const binary = ensureKhatruRelay(log, env);
  const dataDir = path.join(workDir, 'khatru-data');
  mkdirSync(dataDir, { recursive: true });
  const port = opts.port ?? (await freeLoopbackPort());
  const auth = opts.auth ? ['--auth', '--service-url', opts.auth.relayUrl] : [];
  return startRelayProcess({
    name: 'the khatru relay',
    nodeId: `khatru-${khatruVersion()}`,
    binary,
    args: ['--port', String(port), '--data-dir', dataDir, ...auth],
    env,
    workDir,
    logFile: path.join(workDir, 'khatru.log'),
    port,
    cpus: opts.cpus,
    cgroupProcs: opts.cgroupProcs,
  });
}
