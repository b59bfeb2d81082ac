import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { openNodeConnection } from '../store/node.js';
import { findServerBinary } from './binary.js';
import type { BinarySource } from './binary.js';
import { CLUSTER_SIZE, formCluster, parseClusterNodes, parseInfo } from './cluster.js';
import { runDir, venvDir } from '../harness/paths.js';
import { assertPortFree } from '../harness/ports.js';
import { isOurServer, startServer, stopProcess } from './server.js';

export type Topology = 'standalone' | 'cluster';
export const DEFAULT_STANDALONE_PORT = 6379;
export const DEFAULT_CLUSTER_BASE_PORT = 7000;
const HOST = '127.0.0.1';
/** Valkey's cluster bus listens on the client port + 10000. */
const BUS_OFFSET = 10000;

/** What `start` recorded about an instance: enough for `stop` to end exactly what it started. */
export interface InstanceRecord {
  topology: Topology;
  ports: number[];
  pids: number[];
  binary: string;
  binarySource: BinarySource;
  version: string;
  startedAt: string;
}

export interface InstanceSelector {
  topology: Topology;
  /** Standalone port or cluster base port. */
  port: number;
}

export interface Logger {
  info(message: string): void;
  warn(message: string): void;
}

function instanceDir(sel: InstanceSelector, env: NodeJS.ProcessEnv): string {
  return path.join(runDir(env), 'valkey', `${sel.topology}-${sel.port}`);
}

function portsOf(sel: InstanceSelector): number[] {
  if (sel.topology === 'standalone') return [sel.port];
  return Array.from({ length: CLUSTER_SIZE }, (_, i) => sel.port + i);
}

function readRecord(dir: string): InstanceRecord | undefined {
  try {
    return JSON.parse(readFileSync(path.join(dir, 'instance.json'), 'utf8')) as InstanceRecord;
  } catch {
    return undefined;
  }
}

/** The instance's run directory and what it records, if anything. */
function recorded(sel: InstanceSelector, env: NodeJS.ProcessEnv) {
  const dir = instanceDir(sel, env);
  return { dir, record: readRecord(dir) };
}

function liveCount(record: InstanceRecord): number {
  return record.pids.filter((pid, i) => isOurServer(pid, record.ports[i]!)).length;
}

/**
 * Start an instance. Idempotent: an instance already running on these ports is left as it
 * is. A half-dead one (some processes gone) is stopped and started afresh.
 */
export async function startInstance(
  sel: InstanceSelector,
  log: Logger,
  env: NodeJS.ProcessEnv = process.env,
): Promise<InstanceRecord> {
  const { dir, record: existing } = recorded(sel, env);
  if (existing) {
    if (liveCount(existing) === existing.pids.length) {
      log.info(`${describe(sel)} is already running (pids ${existing.pids.join(', ')})`);
      return existing;
    }
    log.warn(`${describe(sel)} was partly running; restarting it`);
    await stopInstance(sel, log, env);
  }
  const binary = findServerBinary(env, venvDir(env));
  if (binary.warning) log.warn(binary.warning);
  const ports = portsOf(sel);
  for (const port of ports) {
    await assertPortFree(port, `${sel.topology} valkey`);
    if (sel.topology === 'cluster')
      await assertPortFree(port + BUS_OFFSET, `cluster bus of ${port}`);
  }
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const record: InstanceRecord = {
    topology: sel.topology,
    ports,
    pids: [],
    binary: binary.path,
    binarySource: binary.source,
    version: serverVersion(binary.path),
    startedAt: new Date().toISOString(),
  };
  try {
    for (const port of ports) {
      const nodeDir = sel.topology === 'cluster' ? path.join(dir, `node-${port}`) : dir;
      const pid = await startServer({
        binary: binary.path,
        port,
        dir: nodeDir,
        cluster: sel.topology === 'cluster',
      });
      record.pids.push(pid);
      // Record as we go, so a failure part-way leaves a record that stop can act on.
      writeRecord(dir, record);
    }
    if (sel.topology === 'cluster') await formCluster(ports.map((port) => ({ host: HOST, port })));
  } catch (err) {
    await stopInstance(sel, log, env);
    throw err;
  }
  log.info(`${describe(sel)} started: ${record.version} from ${binary.path} (${binary.source})`);
  return record;
}

function writeRecord(dir: string, record: InstanceRecord): void {
  writeFileSync(path.join(dir, 'instance.json'), JSON.stringify(record, null, 2) + '\n');
}

function serverVersion(binary: string): string {
  try {
    const out = execFileSync(binary, ['--version'], { encoding: 'utf8', timeout: 5000 });
    const match = /(Valkey|Redis) server v=(\S+)/i.exec(out);
    return match ? `${match[1]} ${match[2]}` : out.trim();
  } catch {
    return 'unknown version';
  }
}

/** Stop the processes this instance's record names, by PID, and wait until they are gone. */
export async function stopInstance(
  sel: InstanceSelector,
  log: Logger,
  env: NodeJS.ProcessEnv = process.env,
): Promise<boolean> {
  const { dir, record } = recorded(sel, env);
  if (!record) {
    log.info(`${describe(sel)} is not running (nothing recorded in ${dir})`);
    return false;
  }
  await Promise.all(record.pids.map((pid, i) => stopProcess(pid, record.ports[i]!)));
  rmSync(dir, { recursive: true, force: true });
  log.info(`${describe(sel)} stopped (pids ${record.pids.join(', ') || 'none'})`);
  return true;
}

/** Every instance recorded in the run directory. */
export function listInstances(env: NodeJS.ProcessEnv = process.env): InstanceSelector[] {
  const base = path.join(runDir(env), 'valkey');
  if (!existsSync(base)) return [];
  return readdirSync(base)
    .map((name) => /^(standalone|cluster)-(\d+)$/.exec(name))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ topology: m[1] as Topology, port: Number(m[2]) }));
}

export async function stopAll(log: Logger, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  for (const sel of listInstances(env)) await stopInstance(sel, log, env);
}

export function describe(sel: InstanceSelector): string {
  if (sel.topology === 'standalone') return `standalone valkey on 127.0.0.1:${sel.port}`;
  return `cluster valkey on 127.0.0.1:${sel.port}-${sel.port + CLUSTER_SIZE - 1}`;
}

/** A human-readable report of every recorded instance and its topology. */
export async function statusReport(env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const selectors = listInstances(env);
  if (selectors.length === 0) return `no embedded Valkey is running (run dir ${runDir(env)})`;
  const parts: string[] = [];
  for (const sel of selectors) {
    const { record } = recorded(sel, env);
    if (!record) continue;
    const live = liveCount(record);
    const state =
      live === record.pids.length
        ? 'running'
        : `DEGRADED (${live}/${record.pids.length} processes alive)`;
    const lines = [
      `${describe(sel)}: ${state}`,
      `  server: ${record.version}, ${record.binary} (${record.binarySource})`,
    ];
    if (sel.topology === 'standalone') {
      lines.push(`  127.0.0.1:${sel.port}  pid ${record.pids[0]}  ${await nodeRole(sel.port)}`);
    } else {
      lines.push(...(await clusterLines(record)));
    }
    parts.push(lines.join('\n'));
  }
  return parts.join('\n\n');
}

async function nodeRole(port: number): Promise<string> {
  try {
    const conn = await openNodeConnection({ host: '127.0.0.1', port }, 500);
    try {
      const info = parseInfo(String(await conn.call('INFO', 'replication')));
      const keys = parseInfo(String(await conn.call('INFO', 'keyspace')));
      return `role ${info.role === 'master' ? 'primary' : 'replica'}, keys ${keys.db0?.match(/keys=(\d+)/)?.[1] ?? 0}`;
    } finally {
      conn.close();
    }
  } catch {
    return 'not answering';
  }
}

async function clusterLines(record: InstanceRecord): Promise<string[]> {
  for (const port of record.ports) {
    try {
      const conn = await openNodeConnection({ host: '127.0.0.1', port }, 500);
      try {
        const info = parseInfo(String(await conn.call('CLUSTER', 'INFO')));
        const nodes = parseClusterNodes(String(await conn.call('CLUSTER', 'NODES')));
        const byId = new Map(nodes.map((n) => [n.id, n]));
        const lines = [
          `  cluster_state:${info.cluster_state}  slots assigned ${info.cluster_slots_assigned}  known nodes ${info.cluster_known_nodes}`,
        ];
        for (const node of [...nodes].sort((a, b) => a.port - b.port)) {
          const pid = record.pids[record.ports.indexOf(node.port)] ?? '?';
          const what =
            node.role === 'primary'
              ? `primary  slots ${node.slots.join(' ') || '-'}`
              : `replica of ${byId.get(node.primaryId ?? '')?.port ?? node.primaryId}`;
          lines.push(
            `  127.0.0.1:${node.port}  pid ${pid}  ${what}${node.connected ? '' : '  (disconnected)'}`,
          );
        }
        return lines;
      } finally {
        conn.close();
      }
    } catch {
      // try the next node
    }
  }
  return ['  no node answers'];
}
