import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The CLI entry point, next to this module in dist/. */
export const CLI = fileURLToPath(new URL('../cli.js', import.meta.url));

export interface SluiceProcess {
  pid: number;
  /** The URL from the ready line, e.g. http://127.0.0.1:41234. */
  url: string;
  port: number;
  readyLine: string;
  /** Everything the process wrote so far (stdout and stderr, interleaved). */
  output(): string;
  /** Signal the process (SIGTERM by default), SIGKILL after a grace period, and wait until
   * it is gone. Resolves with its exit code (null if a signal ended it). */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

const READY = /^sluice \S+ ready: (http:\/\/\S+)/;
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
 * Run `sluice <args>` in the background and wait for its ready line
 * (`sluice <what> ready: <url> ...`). Rejects, with everything the process printed, if it
 * exits or stays silent past the timeout (and then kills it).
 */
export async function spawnSluice(
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; readyTimeoutMs?: number } = {},
): Promise<SluiceProcess> {
  const child = spawn(process.execPath, [...profileArgs(), CLI, ...args], {
    env: opts.env ?? process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  let output = '';
  const append = (chunk: string) => {
    output += chunk;
    if (output.length > MAX_OUTPUT_CHARS) output = output.slice(-MAX_OUTPUT_CHARS);
  };
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', append);

  let ending = '';
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code, signal) => {
      running.delete(child);
      ending = signal ? `was killed by ${signal}` : `exited with code ${code}`;
      resolve(code);
    });
  });
  const command = `sluice ${args.join(' ')}`;
  const timeoutMs = opts.readyTimeoutMs ?? 15_000;

  const readyLine = await new Promise<string>((resolve, reject) => {
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
        if (READY.test(line)) {
          clearTimeout(timer);
          resolve(line);
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

  const url = READY.exec(readyLine)![1]!;
  let stopping: Promise<number | null> | undefined;
  return {
    pid: child.pid!,
    url,
    port: Number(new URL(url).port),
    readyLine,
    output: () => output,
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

/** A reference relay for a benchmark: a fresh data file, a given drain rate. */
export function spawnBenchRelay(
  dataDir: string,
  drain: string | number,
  env: NodeJS.ProcessEnv,
): Promise<SluiceProcess> {
  const args = ['relay', '--port', '0', '--node-id', 'relay-a', '--data-dir', dataDir, '--fresh'];
  return spawnSluice([...args, '--drain-bytes-per-sec', String(drain)], { env });
}
