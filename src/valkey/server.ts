import { spawn } from 'node:child_process';
import { mkdirSync, openSync, closeSync, readFileSync, readlinkSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { openNodeConnection } from '../store/node.js';

export interface ServerSpec {
  binary: string;
  port: number;
  /** Directory for this node's log and nodes.conf. */
  dir: string;
  cluster: boolean;
}

export class ServerStartError extends Error {
  override name = 'ServerStartError';
}

export function logFile(dir: string): string {
  return path.join(dir, 'valkey.log');
}

export interface ServerArgsSpec {
  port: number;
  /** Directory for the node's nodes.conf (and, by default, its log). */
  dir: string;
  cluster: boolean;
  /** Interface to bind: loopback on a bare machine (the default), 0.0.0.0 in a container. */
  bind?: string;
  /** Log file; '' logs to standard output (containers). Default: valkey.log in `dir`. */
  logfile?: string;
  /** Cluster only: the hostname this node announces to clients and peers (containers). */
  announceHostname?: string;
}

/**
 * The valkey-server arguments of every server sluice runs: the bare machine's
 * (`sluice valkey start`) and the Docker Compose files' (test/integration/compose.test.ts holds them to
 * this list). Persistence is off. Protected mode, which refuses every client but loopback
 * when there is no password, stays on unless the server binds beyond loopback: in a
 * container it is there to be reached by the other containers of its private network.
 */
export function serverArgs(spec: ServerArgsSpec): string[] {
  const bind = spec.bind ?? '127.0.0.1';
  const args = [
    '--port',
    String(spec.port),
    '--bind',
    bind,
    '--protected-mode',
    bind === '127.0.0.1' ? 'yes' : 'no',
    '--save',
    '',
    '--appendonly',
    'no',
    '--daemonize',
    'no',
    '--dir',
    spec.dir,
    '--logfile',
    spec.logfile ?? logFile(spec.dir),
  ];
  if (spec.cluster) {
    args.push(
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      path.join(spec.dir, 'nodes.conf'),
      '--cluster-node-timeout',
      '5000',
    );
    if (spec.announceHostname !== undefined) {
      // Clients (CLUSTER SLOTS, MOVED) get this name rather than an address they may not reach.
      args.push(
        '--cluster-announce-hostname',
        spec.announceHostname,
        '--cluster-preferred-endpoint-type',
        'hostname',
      );
    }
  }
  return args;
}

/**
 * Start one server in the background, bound to 127.0.0.1 with persistence off, and wait until
 * it answers PING. Returns its PID. The process is detached so it outlives this CLI call.
 */
export async function startServer(spec: ServerSpec, readyTimeoutMs = 10_000): Promise<number> {
  mkdirSync(spec.dir, { recursive: true });
  const args = serverArgs({ port: spec.port, dir: spec.dir, cluster: spec.cluster });
  // The server writes its own log file; early failures (bad arguments) go to this one.
  const bootLog = openSync(path.join(spec.dir, 'boot.log'), 'w');
  const child = spawn(spec.binary, args, {
    cwd: spec.dir,
    detached: true,
    stdio: ['ignore', bootLog, bootLog],
  });
  closeSync(bootLog);
  let exited: string | undefined;
  child.once('exit', (code, signal) => {
    exited = `exited with ${signal ?? `code ${code}`}`;
  });
  child.once('error', (err) => {
    exited = `could not be started: ${err.message}`;
  });
  child.unref();
  const deadline = Date.now() + readyTimeoutMs;
  while (Date.now() < deadline) {
    if (exited) break;
    if (await answersPing(spec.port)) return child.pid!;
    await sleep(50);
  }
  if (!exited && child.pid) await stopProcess(child.pid, spec.port);
  throw new ServerStartError(
    `valkey on port ${spec.port} ${exited ?? `did not answer PING within ${readyTimeoutMs} ms`}.` +
      ` Last log lines:\n${tailOf(logFile(spec.dir))}${tailOf(path.join(spec.dir, 'boot.log'))}`,
  );
}

async function answersPing(port: number): Promise<boolean> {
  try {
    const conn = await openNodeConnection({ host: '127.0.0.1', port }, 200);
    try {
      return (await conn.call('PING')) === 'PONG';
    } finally {
      conn.close();
    }
  } catch {
    return false;
  }
}

function tailOf(file: string, lines = 8): string {
  try {
    const text = readFileSync(file, 'utf8').trimEnd();
    return text ? text.split('\n').slice(-lines).join('\n') + '\n' : '';
  } catch {
    return '';
  }
}

/** True while the PID is a live (not zombie) server process listening on `port`. */
/** True while the process exists and is not a zombie (a zombie still answers kill(0)). */
export function isLive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The state letter follows the command name, which may itself hold spaces or ")".
    return !stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return false;
  }
}

export function isOurServer(pid: number, port: number, binary?: string): boolean {
  if (!isLive(pid)) return false;
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
    if (!/(valkey|redis)-server/.test(cmdline) || !cmdline.includes(String(port))) return false;
    if (binary) return realpathSync(readlinkSync(`/proc/${pid}/exe`)) === realpathSync(binary);
    return true;
  } catch {
    return false;
  }
}

/**
 * Stop a server we started: SIGTERM, then SIGKILL after a grace period, and wait until the
 * process is gone. A PID that is no longer our server (reused by the OS) is left alone.
 */
export async function stopProcess(pid: number, port: number, graceMs = 5000): Promise<void> {
  if (!isOurServer(pid, port)) return;
  process.kill(pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!isOurServer(pid, port)) return;
    await sleep(25);
  }
  if (isOurServer(pid, port)) process.kill(pid, 'SIGKILL');
  while (isOurServer(pid, port)) await sleep(25);
}
