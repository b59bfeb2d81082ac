/**
 * Faults of a real Valkey Cluster under load, for the scaled-down run: kill the primary of a
 * slot and wait for a replica to take it over; move a slot to another primary key by key
 * (the classic IMPORTING / MIGRATING / MIGRATE / SETSLOT NODE sequence), so clients meet
 * ASK while it moves and MOVED after.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { NodeAddress } from '../../store/index.js';
import { openNodeConnection } from '../../store/node.js';
import type { NodeConnection } from '../../store/node.js';
import { parseClusterNodes } from '../../valkey/cluster.js';
import type { ClusterNodeView } from '../../valkey/cluster.js';

const POLL_MS = 50;
/** Connecting to a node for administration: generous, the machine is under load by design. */
export const ADMIN_TIMEOUT_MS = 5000;

/** Whether a view's slot ranges hold `slot`. */
export function servesSlot(view: Pick<ClusterNodeView, 'slots'>, slot: number): boolean {
  return view.slots.some((range) => {
    const [a, b] = range.split('-').map(Number);
    return slot >= a! && slot <= (b ?? a!);
  });
}

export async function clusterViews(node: NodeAddress): Promise<ClusterNodeView[]> {
  const conn = await openNodeConnection(node, ADMIN_TIMEOUT_MS);
  try {
    return parseClusterNodes(String(await conn.call('CLUSTER', 'NODES')));
  } finally {
    conn.close();
  }
}

/** The primary serving `slot`, as `node` sees the cluster. */
export async function ownerOf(node: NodeAddress, slot: number): Promise<ClusterNodeView> {
  const owner = (await clusterViews(node)).find(
    (v) => v.role === 'primary' && !v.failed && servesSlot(v, slot),
  );
  if (!owner) throw new Error(`no primary serves slot ${slot} (asked ${node.port})`);
  return owner;
}

/**
 * After the primary `killedId` died: wait until `survivor` sees another primary, not failed,
 * serving `slot` and the cluster's state ok again. Returns when (performance.now()).
 */
export async function awaitTakeover(
  survivor: NodeAddress,
  slot: number,
  killedId: string,
  timeoutMs: number,
): Promise<{ at: number; owner: ClusterNodeView }> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    try {
      const views = await clusterViews(survivor);
      const owner = views.find(
        (v) => v.role === 'primary' && !v.failed && v.id !== killedId && servesSlot(v, slot),
      );
      if (owner && (await clusterStateOk(survivor))) return { at: performance.now(), owner };
    } catch {
      // A node busy with the election may answer late: ask again.
    }
    if (performance.now() > deadline) {
      throw new Error(`no replica took slot ${slot} over within ${timeoutMs} ms`);
    }
    await sleep(POLL_MS);
  }
}

async function clusterStateOk(node: NodeAddress): Promise<boolean> {
  const conn = await openNodeConnection(node, ADMIN_TIMEOUT_MS);
  try {
    return /cluster_state:ok/.test(String(await conn.call('CLUSTER', 'INFO')));
  } finally {
    conn.close();
  }
}

export interface SlotMove {
  keys: number;
  /** performance.now() when the slot was marked migrating, and when every node owned it. */
  startedAt: number;
  endedAt: number;
}

/**
 * Move `slot` from `source` to `target` while clients use it, one key at a time with
 * `pauseMs` between keys (MIGRATE moves a key whole, with its TTL), then tell every primary
 * the new owner.
 */
export async function migrateSlot(
  slot: number,
  source: ClusterNodeView & { address: NodeAddress },
  target: ClusterNodeView & { address: NodeAddress },
  primaries: readonly NodeAddress[],
  pauseMs: number,
): Promise<SlotMove> {
  const from = await openNodeConnection(source.address, ADMIN_TIMEOUT_MS);
  const to = await openNodeConnection(target.address, ADMIN_TIMEOUT_MS);
  const startedAt = performance.now();
  let keys = 0;
  try {
    await to.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', source.id);
    await from.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', target.id);
    for (;;) {
      const batch = (await from.call('CLUSTER', 'GETKEYSINSLOT', slot, 1)) as string[];
      if (batch.length === 0) break;
      const { host, port } = target.address;
      await from.call('MIGRATE', host, port, '', 0, 5000, 'KEYS', ...batch);
      keys += batch.length;
      await sleep(pauseMs);
    }
    // The target first, then the source (so it answers MOVED, not ASK), then the rest.
    await to.call('CLUSTER', 'SETSLOT', slot, 'NODE', target.id);
    await from.call('CLUSTER', 'SETSLOT', slot, 'NODE', target.id);
    await Promise.all(
      primaries
        .filter((a) => a.port !== source.address.port && a.port !== target.address.port)
        .map((a) => setSlotOn(a, slot, target.id)),
    );
  } finally {
    from.close();
    to.close();
  }
  return { keys, startedAt, endedAt: performance.now() };
}

async function setSlotOn(node: NodeAddress, slot: number, owner: string): Promise<void> {
  let conn: NodeConnection | undefined;
  try {
    conn = await openNodeConnection(node, ADMIN_TIMEOUT_MS);
    await conn.call('CLUSTER', 'SETSLOT', slot, 'NODE', owner);
  } finally {
    conn?.close();
  }
}
