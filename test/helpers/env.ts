import { randomUUID } from 'node:crypto';
import { after, before } from 'node:test';
import { CLIENT_KINDS, TOPOLOGIES, createStore, parseNodeAddress } from '../../src/store/index.js';
import { freeLoopbackPort } from '../../src/harness/ports.js';
import type {
  ClientKind,
  NodeAddress,
  Store,
  StoreOptionsInput,
  Topology,
} from '../../src/store/index.js';

/**
 * The Valkey instances that scripts/test.sh starts for the suite. Tests fail loudly without
 * them rather than skipping: an empty run must never look green.
 */
function required(name: string): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set: run the suite through ./scripts/test.sh`);
  }
  return value;
}

export function standaloneNodes(): NodeAddress[] {
  return [parseNodeAddress(required('SLUICE_TEST_STANDALONE'))];
}

/** All six cluster nodes; the first three are the primaries. */
export function clusterNodes(): NodeAddress[] {
  const base = parseNodeAddress(required('SLUICE_TEST_CLUSTER'));
  return Array.from({ length: 6 }, (_, i) => ({ host: base.host, port: base.port + i }));
}

export function nodesFor(mode: Topology): NodeAddress[] {
  return mode === 'cluster' ? clusterNodes() : standaloneNodes();
}

export const MODES: Topology[] = [...TOPOLOGIES];

export function storeOptions(client: ClientKind, mode: Topology): StoreOptionsInput {
  return {
    client,
    mode,
    nodes: nodesFor(mode),
    timeouts: { connectMs: 3000, commandMs: 1000 },
    clientName: `sluice-test-${client}`,
  };
}

/** A store of `client` on `mode` for the enclosing suite: connected before it, closed after. */
export function suiteStore(client: ClientKind, mode: Topology): () => Store {
  let store: Store | undefined;
  before(async () => {
    store = await createStore(storeOptions(client, mode));
  });
  after(async () => {
    await store?.close();
  });
  return () => {
    if (!store) throw new Error('the suite store is not connected yet');
    return store;
  };
}

/** Every client x topology combination: the clients' table (store/clients/registry.ts) decides. */
export function matrix(): { client: ClientKind; mode: Topology }[] {
  return MODES.flatMap((mode) => CLIENT_KINDS.map((client) => ({ client, mode })));
}

/** A key prefix no other test (or earlier run) uses. */
export function uniquePrefix(label: string): string {
  return `test:${label}:${randomUUID().slice(0, 8)}`;
}

/** A loopback port with nothing listening on it. */
export const unusedPort = freeLoopbackPort;
