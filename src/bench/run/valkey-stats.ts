/**
 * The Valkey side of a run: which server processes serve it (for /proc sampling) and how many
 * commands they executed (INFO commandstats on every primary, after minus before).
 */
import { openNodeConnection } from '../../store/node.js';
import type { NodeAddress } from '../../store/options.js';
import { parseClusterNodes, parseInfo } from '../../valkey/cluster.js';
import type { WatchedProcess } from './proc-sampler.js';

export interface ValkeyNode {
  address: NodeAddress;
  role: 'primary' | 'replica';
  pid: number;
  version: string;
}

async function info(address: NodeAddress, section: string): Promise<Record<string, string>> {
  const conn = await openNodeConnection(address);
  try {
    return parseInfo(String(await conn.call('INFO', section)));
  } finally {
    conn.close();
  }
}

/** Every node of the deployment the seed belongs to: itself, or all members of its cluster. */
export async function discoverNodes(seed: NodeAddress): Promise<ValkeyNode[]> {
  const server = await info(seed, 'server');
  const cluster = await info(seed, 'cluster');
  let members: { address: NodeAddress; role: 'primary' | 'replica' }[] = [
    { address: seed, role: 'primary' },
  ];
  if (cluster.cluster_enabled === '1') {
    const conn = await openNodeConnection(seed);
    try {
      const views = parseClusterNodes(String(await conn.call('CLUSTER', 'NODES')));
      // Benchmarks run on loopback: every member shares the seed's host.
      members = views.map((v) => ({ address: { host: seed.host, port: v.port }, role: v.role }));
    } finally {
      conn.close();
    }
  }
  return Promise.all(
    members.map(async (m) => {
      const s = m.address.port === seed.port ? server : await info(m.address, 'server');
      return {
        ...m,
        pid: Number(s.process_id),
        version: s.valkey_version ?? s.redis_version ?? 'unknown',
      };
    }),
  );
}

/** Processes to sample: only those on this machine (a remote node's pid means nothing here). */
export function watchedValkey(nodes: ValkeyNode[]): WatchedProcess[] {
  const local = new Set(['127.0.0.1', 'localhost', '::1']);
  return nodes
    .filter((n) => local.has(n.address.host) && n.pid > 0)
    .map((n) => ({
      role: 'valkey' as const,
      name: `valkey ${n.address.host}:${n.address.port} (${n.role})`,
      pid: n.pid,
    }));
}

/** "cmdstat_evalsha:calls=12,usec=..." lines into { evalsha: 12 }. */
export function parseCommandStats(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, value] of Object.entries(parseInfo(text))) {
    if (!key.startsWith('cmdstat_')) continue;
    const calls = /(?:^|,)calls=(\d+)/.exec(value);
    if (calls) out[key.slice('cmdstat_'.length)] = Number(calls[1]);
  }
  return out;
}

/** Calls per command summed over the primaries (replicas replay writes; they are not asked). */
export async function commandCalls(nodes: ValkeyNode[]): Promise<Record<string, number>> {
  const totals: Record<string, number> = {};
  for (const node of nodes.filter((n) => n.role === 'primary')) {
    const conn = await openNodeConnection(node.address);
    try {
      const stats = parseCommandStats(String(await conn.call('INFO', 'commandstats')));
      for (const [cmd, calls] of Object.entries(stats)) totals[cmd] = (totals[cmd] ?? 0) + calls;
    } finally {
      conn.close();
    }
  }
  return totals;
}

/** Commands that run a script or function: one round trip each, whatever runs inside. */
const SCRIPT_COMMANDS = new Set(['eval', 'evalsha', 'eval_ro', 'evalsha_ro', 'fcall', 'fcall_ro']);

export interface CommandDelta {
  commands: Record<string, number>;
  /** Every command Valkey executed, those inside scripts included (commandstats counts them). */
  calls: number;
  perRequest: number | null;
  /** Script and function invocations: the round trips that carry the quota logic. */
  scriptCalls: number;
  scriptCallsPerRequest: number | null;
}

/**
 * What the run cost Valkey: the difference of two commandCalls snapshots, without the
 * harness's own INFO calls, and per response received.
 */
export function commandDelta(
  before: Record<string, number>,
  after: Record<string, number>,
  requests: number,
): CommandDelta {
  const commands: Record<string, number> = {};
  for (const [cmd, calls] of Object.entries(after)) {
    // The harness's own INFO calls and the replicas' replication traffic are not the run's.
    if (cmd === 'info' || cmd === 'replconf' || cmd === 'psync' || cmd === 'sync') continue;
    const d = calls - (before[cmd] ?? 0);
    if (d > 0) commands[cmd] = d;
  }
  const sum = (entries: [string, number][]) => entries.reduce((a, [, n]) => a + n, 0);
  const calls = sum(Object.entries(commands));
  const scriptCalls = sum(Object.entries(commands).filter(([c]) => SCRIPT_COMMANDS.has(c)));
  const per = (n: number) => (requests > 0 ? n / requests : null);
  return {
    commands,
    calls,
    perRequest: per(calls),
    scriptCalls,
    scriptCallsPerRequest: per(scriptCalls),
  };
}
