import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseReadyLine } from '../util/ready-line.js';
import type { ReadyInfo } from '../util/ready-line.js';
import type { LawName } from '../pressure/laws/registry.js';
import { underTaskset } from './pinning.js';

/** The CLI entry point, next to this module in dist/. */
export const CLI = fileURLToPath(new URL('../cli.js', import.meta.url));

export interface SluiceProcess {
  pid: number;
  /** The URL from the ready line, e.g. http://127.0.0.1:41234. */
  url: string;
  port: number;
  /** What the process said in its ready line (see util/ready-line.ts). */
  ready: ReadyInfo;
  /** Everything the process wrote so far (stdout and stderr, interleaved). */
  output(): string;
  /** Signal the process (SIGTERM by default), SIGKILL after a grace period, and wait until
   * it is gone. Resolves with its exit code (null if a signal ended it). */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  /** Settles when the process is gone, however it ended (a stop, a crash, the OOM killer). */
  exited: Promise<ProcessExit>;
}

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/**
 * `command args` started so that it is in the cgroup whose `cgroup.procs` file is given before
 * it allocates anything: a shell writes its own pid there, then execs the command (same pid).
 */
export function inCgroup(
  procsFile: string | undefined,
  command: string,
  args: string[],
): [string, string[]] {
  if (!procsFile) return [command, args];
  return ['/bin/sh', ['-c', 'echo $$ > "$0" && exec "$@"', procsFile, command, ...args]];
}

const STOP_GRACE_MS = 10_000;
const MAX_OUTPUT_CHARS = 256 * 1024;

/** Every child still running; killed when this process exits, whatever the reason. */
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) {
    try {
      child.kill('SIGKILL');
    } catch {
      // Already gone.
    }
  }
});

/** Kill `child` (SIGKILL) if this process exits while it still runs. */
export function killOnExit(child: ChildProcess): void {
  running.add(child);
  child.once('exit', () => running.delete(child));
}

/** The admin listener's URL from a gateway's ready line. */
export function adminUrlOf(proc: Pick<SluiceProcess, 'ready'>): string {
  const url = proc.ready.admin;
  if (!url) throw new Error(`no admin URL in ${JSON.stringify(proc.ready)}`);
  return url;
}

/**
 * SLUICE_BENCH_CPU_PROF=DIR: every process of ours a benchmark starts writes a V8 CPU profile
 * there when it stops, named with its pid, which the run's result file gives for each role
 * (`--cpu-prof` is not allowed in NODE_OPTIONS).
 */
function profileArgs(): string[] {
  const dir = process.env.SLUICE_BENCH_CPU_PROF;
  return dir ? ['--cpu-prof', `--cpu-prof-dir=${dir}`] : [];
}

/**
 * Run `sluice <args>` in the background and wait for its ready line (JSON, see
 * util/ready-line.ts). Rejects, with everything the process printed, if it
 * exits or stays silent past the timeout (and then kills it).
 */
export async function spawnSluice(
  args: string[],
  opts: {
    env?: NodeJS.ProcessEnv;
    readyTimeoutMs?: number;
    cgroupProcs?: string;
    /** Start it under `taskset -c` on these cores (a single-box benchmark run). */
    cpus?: readonly number[] | null;
  } = {},
): Promise<SluiceProcess> {
  const [file, argv] = inCgroup(
    opts.cgroupProcs,
    ...underTaskset(opts.cpus, process.execPath, [...profileArgs(), CLI, ...args]),
  );
  const child = spawn(file, argv, {
    env: opts.env ?? process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  killOnExit(child);
  let output = '';
  const append = (chunk: string) => {
    output += chunk;
    if (output.length > MAX_OUTPUT_CHARS) output = output.slice(-MAX_OUTPUT_CHARS);
  };
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', append);

  let ending = '';
  const ended = new Promise<ProcessExit>((resolve) => {
    child.once('exit', (code, signal) => {
      ending = signal ? `was killed by ${signal}` : `exited with code ${code}`;
      resolve({ code, signal });
    });
  });
  const exited = ended.then((e) => e.code);
  const command = `sluice ${args.join(' ')}`;
  const timeoutMs = opts.readyTimeoutMs ?? 15_000;

  const ready = await new Promise<ReadyInfo>((resolve, reject) => {
    let pending = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${command}: not ready within ${timeoutMs} ms. Output:\n${output}`));
    }, timeoutMs);
    child.stdout.on('data', (chunk: string) => {
      append(chunk);
      pending += chunk;
      let nl: number;
      while ((nl = pending.indexOf('\n')) !== -1) {
        const line = pending.slice(0, nl).trimEnd();
        pending = pending.slice(nl + 1);
        const info = parseReadyLine(line);
        if (info) {
          clearTimeout(timer);
          resolve(info);
        }
      }
    });
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`${command}: could not start: ${err.message}`));
    });
    void exited.then(() => {
      clearTimeout(timer);
      // Let the last output arrive before quoting it.
      setImmediate(() =>
        reject(new Error(`${command}: ${ending} before it was ready. Output:\n${output}`)),
      );
    });
  });

  const { url } = ready;
  let stopping: Promise<number | null> | undefined;
  return {
    pid: child.pid!,
    url,
    port: Number(new URL(url).port),
    ready,
    output: () => output,
    exited: ended,
    stop: (signal = 'SIGTERM') =>
      (stopping ??= (async () => {
        if (child.exitCode !== null || child.signalCode !== null) return exited;
        child.kill(signal);
        const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
        try {
          return await exited;
        } finally {
          clearTimeout(timer);
        }
      })()),
  };
}

/** A reference relay (`sluice relay`) on a free loopback port. */
export interface RelayOptions {
  nodeId: string;
  /** Its data directory; by default an empty one of its own, removed when it stops. */
  dataDir?: string;
  /** A fixed port (a restart keeps its address); 0, a free one, by default. */
  port?: number;
  /** Start it inside this cgroup (its `cgroup.procs` file). */
  cgroupProcs?: string;
  /** Start from an empty data directory. */
  fresh?: boolean;
  drainBytesPerSec?: number | string;
  workIterations?: number;
  extraArgs?: string[];
  env?: NodeJS.ProcessEnv;
  /** Start it under `taskset -c` on these cores. */
  cpus?: readonly number[] | null;
}

export async function startRelay(o: RelayOptions): Promise<SluiceProcess> {
  if (o.dataDir !== undefined) return startRelayIn(o.dataDir, o);
  const dataDir = mkdtempSync(path.join(os.tmpdir(), `sluice-${o.nodeId}-`));
  const removeDir = () => rmSync(dataDir, { recursive: true, force: true });
  const relay = await startRelayIn(dataDir, o).catch((err: unknown) => {
    removeDir();
    throw err;
  });
  const stop = relay.stop.bind(relay);
  relay.stop = async (signal) => {
    try {
      return await stop(signal);
    } finally {
      removeDir();
    }
  };
  return relay;
}

function startRelayIn(dataDir: string, o: RelayOptions): Promise<SluiceProcess> {
  const args = ['relay', '--port', String(o.port ?? 0), '--node-id', o.nodeId];
  args.push('--data-dir', dataDir);
  if (o.fresh) args.push('--fresh');
  if (o.drainBytesPerSec !== undefined) {
    args.push('--drain-bytes-per-sec', String(o.drainBytesPerSec));
  }
  if (o.workIterations !== undefined) args.push('--work-iterations', String(o.workIterations));
  return spawnSluice([...args, ...(o.extraArgs ?? [])], {
    env: o.env,
    cgroupProcs: o.cgroupProcs,
    cpus: o.cpus,
  });
}

/** A pressure feed (`sluice feed`) for one relay node, publishing through Valkey. */
export interface FeedOptions {
  nodeId: string;
  /** The source: a reference relay's metrics (and its backlog), or `pid`, or `cgroup`. */
  relayUrl?: string;
  /** The source: this process's memory, from /proc. */
  pid?: number;
  /** The source: a cgroup directory (its memory less inactive file pages). */
  cgroup?: string;
  targetBytes: number | string;
  tickMs: number;
  /** The tick under pressure (the feed's default when not given; = tickMs turns it off). */
  fastTickMs?: number;
  valkey: { client: string; mode: string; nodes: string[] };
  law?: LawName;
  env?: NodeJS.ProcessEnv;
  /** false: the feed learns no write budget (--no-learn-budget). */
  learnBudget?: boolean;
  /**
   * true: resume from the estimate a previous feed of this node saved. By default a feed
   * started here forgets it (--forget-budget): tests and benchmarks share one Valkey and reuse
   * node ids, and one file's relay-a is not the next one's.
   */
  keepLearned?: boolean;
  /** A reference relay whose /stats gives the learned budget its drain (--drain-stats). */
  drainStats?: string;
}

export function startFeed(o: FeedOptions): Promise<SluiceProcess> {
  const sources = [o.relayUrl, o.pid, o.cgroup].filter((s) => s !== undefined);
  if (sources.length !== 1) {
    throw new Error('startFeed: give exactly one source, relayUrl, pid or cgroup');
  }
  const source =
    o.pid !== undefined
      ? ['--pid', String(o.pid)]
      : o.cgroup !== undefined
        ? ['--cgroup', o.cgroup]
        : ['--relay', o.relayUrl!];
  const args = ['feed', '--node-id', o.nodeId, ...source];
  args.push('--target-bytes', String(o.targetBytes), '--tick-ms', String(o.tickMs));
  if (o.fastTickMs !== undefined) args.push('--fast-tick-ms', String(o.fastTickMs));
  if (o.law) args.push('--law', o.law);
  if (o.learnBudget === false) args.push('--no-learn-budget');
  else if (o.keepLearned !== true) args.push('--forget-budget');
  if (o.drainStats !== undefined) args.push('--drain-stats', o.drainStats);
  args.push('--valkey-client', o.valkey.client, '--valkey-mode', o.valkey.mode);
  args.push('--valkey-nodes', o.valkey.nodes.join(','));
  return spawnSluice(args, { env: o.env });
}

export interface RunningGateway {
  proc: SluiceProcess;
  url: string;
  adminUrl: string;
  configFile: string;
}

/** `sluice gateway` with `config` (any gateway configuration object) written to `configFile`. */
export async function startGateway(
  config: unknown,
  configFile: string,
  opts: { env?: NodeJS.ProcessEnv; readyTimeoutMs?: number; cpus?: readonly number[] | null } = {},
): Promise<RunningGateway> {
  writeFileSync(configFile, JSON.stringify(config, null, 2));
  const proc = await spawnSluice(['gateway', '--config', configFile], opts);
  return { proc, url: proc.url, adminUrl: adminUrlOf(proc), configFile };
}
