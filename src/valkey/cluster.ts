import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { openNodeConnection } from '../store/node.js';
import type { NodeConnection } from '../store/node.js';
import type { NodeAddress } from '../store/options.js';

export const CLUSTER_SIZE = 6;
const PRIMARIES = 3;
const TOTAL_SLOTS = 16384;

export class ClusterFormationError extends Error {
  override name = 'ClusterFormationError';
}

/** Slot ranges [first, last] for each primary: an even split of the 16384 slots. */
export function slotRanges(primaries = PRIMARIES): [number, number][] {
  const ranges: [number, number][] = [];
  for (let i = 0; i < primaries; i++) {
    const first = Math.floor((i * TOTAL_SLOTS) / primaries);
    const last = Math.floor(((i + 1) * TOTAL_SLOTS) / primaries) - 1;
    ranges.push([first, last]);
  }
  return ranges;
}

/**
 * Form a cluster of 3 primaries and 3 replicas from 6 fresh cluster-enabled nodes without
 * valkey-cli: ADDSLOTSRANGE on each primary, MEET from the first node, REPLICATE on each
 * replica once its primary is known. Ready only when every node reports cluster_state:ok
 * and every replica's link to its primary is up. The first three nodes become the primaries,
 * the next three their replicas, in order. `sluice valkey start --cluster` passes its own
 * loopback nodes; `sluice valkey create-cluster` any six (the Docker Compose cluster's).
 */
export async function formCluster(nodes: NodeAddress[], timeoutMs = 30_000): Promise<void> {
  if (nodes.length !== CLUSTER_SIZE) {
    throw new ClusterFormationError(
      `a cluster needs ${CLUSTER_SIZE} nodes (3 primaries, 3 replicas); got ${nodes.length}`,
    );
  }
  const conns = await Promise.all(nodes.map((node) => openNodeConnection(node)));
  try {
    const deadline = Date.now() + timeoutMs;
    const ids = (await Promise.all(conns.map((c) => c.call('CLUSTER', 'MYID')))).map(String);
    // Distinct config epochs up front spare the nodes a round of epoch-collision resolution.
    await Promise.all(conns.map((c, i) => c.call('CLUSTER', 'SET-CONFIG-EPOCH', i + 1)));
    const ranges = slotRanges();
    await Promise.all(
      ranges.map(([first, last], i) => conns[i]!.call('CLUSTER', 'ADDSLOTSRANGE', first, last)),
    );
    for (const node of nodes.slice(1)) {
      // MEET takes an IP address, not a name.
      await conns[0]!.call('CLUSTER', 'MEET', await addressOf(node.host), node.port);
    }
    for (let r = PRIMARIES; r < conns.length; r++) {
      await replicateWhenKnown(conns[r]!, ids[r - PRIMARIES]!, deadline);
    }
    await waitUntilHealthy(conns, deadline);
  } catch (err) {
    if (err instanceof ClusterFormationError) throw err;
    throw new ClusterFormationError(
      `cluster on ${nodes.map((n) => `${n.host}:${n.port}`).join(',')} could not be formed: ` +
        `${String(err)}\n${await describeViews(conns)}`,
    );
  } finally {
    for (const c of conns) c.close();
  }
}

/** True when these six nodes already form the healthy cluster that formCluster makes. */
export async function isClusterFormed(nodes: NodeAddress[]): Promise<boolean> {
  const conns = await Promise.all(nodes.map((node) => openNodeConnection(node)));
  try {
    return (await healthProblems(conns)).length === 0;
  } finally {
    for (const c of conns) c.close();
  }
}

async function addressOf(host: string): Promise<string> {
  if (isIP(host)) return host;
  return (await lookup(host, { family: 4 })).address;
}

async function replicateWhenKnown(
  replica: NodeConnection,
  primaryId: string,
  deadline: number,
): Promise<void> {
  for (;;) {
    try {
      await replica.call('CLUSTER', 'REPLICATE', primaryId);
      return;
    } catch (err) {
      // "Unknown node" until gossip has told the replica about its primary.
      if (Date.now() > deadline) throw err;
      await sleep(50);
    }
  }
}

async function waitUntilHealthy(conns: NodeConnection[], deadline: number): Promise<void> {
  for (;;) {
    const problems = await healthProblems(conns);
    if (problems.length === 0) return;
    if (Date.now() > deadline) {
      throw new ClusterFormationError(
        `cluster did not converge in time: ${problems.join('; ')}\n${await describeViews(conns)}`,
      );
    }
    await sleep(100);
  }
}

/** What still keeps the cluster from being ready; empty when it is. */
export async function healthProblems(conns: NodeConnection[]): Promise<string[]> {
  const problems: string[] = [];
  for (const [i, conn] of conns.entries()) {
    const port = conn.address.port;
    const info = parseInfo(String(await conn.call('CLUSTER', 'INFO')));
    if (info.cluster_state !== 'ok') problems.push(`${port}: cluster_state:${info.cluster_state}`);
    if (info.cluster_known_nodes !== String(conns.length)) {
      problems.push(`${port}: knows ${info.cluster_known_nodes} of ${conns.length} nodes`);
    }
    if (info.cluster_slots_assigned !== String(TOTAL_SLOTS)) {
      problems.push(`${port}: ${info.cluster_slots_assigned} slots assigned`);
    }
    if (i >= PRIMARIES) {
      const repl = parseInfo(String(await conn.call('INFO', 'replication')));
      if (repl.role !== 'slave' || repl.master_link_status !== 'up') {
        problems.push(`${port}: replica link ${repl.master_link_status ?? 'absent'}`);
      }
    }
  }
  return problems;
}

/** Each node's own view (CLUSTER NODES), for error messages. */
export async function describeViews(conns: NodeConnection[]): Promise<string> {
  const views: string[] = [];
  for (const conn of conns) {
    try {
      views.push(
        `--- view of ${conn.address.port}:\n${String(await conn.call('CLUSTER', 'NODES'))}`,
      );
    } catch (err) {
      views.push(`--- view of ${conn.address.port}: unavailable (${String(err)})`);
    }
  }
  return views.join('\n');
}

/** Parse INFO text ("key:value" lines) into a record. */
export function parseInfo(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split(/\r?\n/)) {
    const idx = line.indexOf(':');
    if (idx > 0 && !line.startsWith('#')) out[line.slice(0, idx)] = line.slice(idx + 1).trim();
  }
  return out;
}

export interface ClusterNodeView {
  id: string;
  port: number;
  role: 'primary' | 'replica';
  primaryId: string | null;
  /** Slot ranges ("0-5460", "5461"; open migrations "[slot->-id]" are left out). */
  slots: string[];
  connected: boolean;
  /** Flagged failed by the cluster (fail, not the suspicion fail?). */
  failed: boolean;
}

/** Parse CLUSTER NODES output. */
export function parseClusterNodes(text: string): ClusterNodeView[] {
  return text
    .split('\n')
    .filter((line) => line.trim())
    .map((line) => {
      const [id, addr, flags, primary, , , , link, ...slots] = line.trim().split(' ');
      const port = Number(/:(\d+)/.exec(addr ?? '')?.[1]);
      return {
        id: id ?? '',
        port,
        role: flags?.includes('master') ? 'primary' : 'replica',
        primaryId: primary && primary !== '-' ? primary : null,
        slots: slots.filter((s) => !s.startsWith('[')),
        connected: link === 'connected',
        failed: (flags ?? '').split(',').includes('fail'),
      };
    });
}
