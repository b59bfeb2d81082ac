/**
 * A third-party relay's process, whichever relay it is: started with its log appended to a
 * file in its work directory (pinned to cores, inside a cgroup when asked), ready once it
 * accepts a WebSocket (with a deadline), and stopped by its PID (SIGTERM, then SIGKILL).
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { WebSocket } from 'ws';
import { underTaskset } from '../../harness/pinning.js';
import { inCgroup, killOnExit } from '../../harness/processes.js';
import type { ProcessExit } from '../../harness/processes.js';

const READY_TIMEOUT_MS = 20_000;
const STOP_GRACE_MS = 5_000;

/**
 * Where third-party relays are built and cached: `$SLUICE_RELAY_CACHE`, else
 * `${XDG_CACHE_HOME:-~/.cache}/sluice/relays`.
 */
export function relayCacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SLUICE_RELAY_CACHE) return env.SLUICE_RELAY_CACHE;
  const cache = env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(cache, 'sluice', 'relays');
}

export interface ThirdPartyRelay {
  pid: number;
  /** http://127.0.0.1:<port>: the gateway's upstream (its WebSocket is the same URL as ws:). */
  url: string;
  wsUrl: string;
  nodeId: string;
  /** What the relay printed (its log file), for errors. */
  output(): string;
  stop(): Promise<void>;
  /** Settles when the process is gone, however it ended. */
  exited: Promise<ProcessExit>;
}

/** Where and how a relay process runs, whichever relay it is. */
export interface RelayProcessOptions {
  /** Start it under `taskset -c` on these cores (a single-box benchmark run). */
  cpus?: readonly number[] | null;
  /** A fixed port (a restart on the same data keeps its address); else a free one. */
  port?: number;
  /** Start it inside this cgroup (its `cgroup.procs` file). */
  cgroupProcs?: string;
}

/** How a benchmark or a test starts a third-party relay. */
export interface RelayStartOptions extends RelayProcessOptions {
  /** NIP-42 on: the relay sends a challenge on connect and checks AUTH events' relay tag against this URL. */
  auth?: { relayUrl: string };
}

export interface RelayProcessSpec {
  /** The relay's name in errors. */
  name: string;
  nodeId: string;
  binary: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  workDir: string;
  /** Its output, appended (a restart on the same directory keeps what the one before said). */
  logFile: string;
  port: number;
  cpus?: readonly number[] | null;
  cgroupProcs?: string;
}

/** True once a WebSocket to `url` opens (then closed at once). */
function wsOpens(url: string, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { handshakeTimeout: timeoutMs });
    const done = (ok: boolean) => {
      ws.removeAllListeners();
      ws.on('error', () => undefined);
      ws.terminate();
      resolve(ok);
    };
    ws.once('open', () => done(true));
    ws.once('error', () => done(false));
    ws.once('close', () => done(false));
  });
}

function waitExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/** Start the relay and wait (with a deadline) until it accepts a WebSocket on its port. */
export async function startRelayProcess(spec: RelayProcessSpec): Promise<ThirdPartyRelay> {
  const fd = openSync(spec.logFile, 'a');
  const [file, args] = inCgroup(
    spec.cgroupProcs,
    ...underTaskset(spec.cpus, spec.binary, spec.args),
  );
  const child = spawn(file, args, { cwd: spec.workDir, env: spec.env, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  killOnExit(child);
  const output = () => {
    try {
      return readFileSync(spec.logFile, 'utf8').slice(-16_384);
    } catch {
      return '';
    }
  };
  let exited = false;
  const ended = new Promise<ProcessExit>((resolve) =>
    child.once('exit', (code, signal) => {
      exited = true;
      resolve({ code, signal });
    }),
  );
  const stop = async () => {
    if (exited) return;
    child.kill('SIGTERM');
    if (!(await waitExit(child, STOP_GRACE_MS))) {
      child.kill('SIGKILL');
      await waitExit(child, STOP_GRACE_MS);
    }
  };
  const url = `http://127.0.0.1:${spec.port}`;
  const wsUrl = `ws://127.0.0.1:${spec.port}/`;
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (exited) {
      throw new Error(`${spec.name} exited before it accepted a WebSocket. Output:\n${output()}`);
    }
    if (await wsOpens(wsUrl, 1000)) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(
        `${spec.name} did not accept a WebSocket on ${wsUrl} within ${READY_TIMEOUT_MS} ms. Output:\n${output()}`,
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { pid: child.pid!, url, wsUrl, nodeId: spec.nodeId, output, stop, exited: ended };
}

/** `name` on PATH, if there. */
export function onPath(name: string, env: NodeJS.ProcessEnv): string | undefined {
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const file = path.join(dir, name);
    if (existsSync(file)) return file;
  }
  return undefined;
}
