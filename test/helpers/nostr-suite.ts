import { after, before } from 'node:test';
import type { ClientKind, Topology } from '../../src/store/index.js';
import { NostrClient, startGateway } from './gateway.js';
import type { GatewayUnderTest } from './gateway.js';
import { startRelay, stopAll } from './processes.js';
import type { RelayProcess } from './processes.js';

export interface NostrSuite {
  gw: () => GatewayUnderTest;
  relay: () => RelayProcess;
  /** A client of the gateway from a chosen loopback address, closed after the suite. */
  connect: (from: string) => Promise<NostrClient>;
}

/**
 * A reference relay behind one gateway for the enclosing suite: started before it, stopped
 * after. The gateway's write quota is `limit` per minute under its own key prefix; `settings`
 * adds to (or replaces) the rest of its configuration.
 */
export function nostrSuite(opts: {
  client: ClientKind;
  mode: Topology;
  limit: number;
  settings: Record<string, unknown>;
  relayArgs?: string[];
}): NostrSuite {
  let relay: RelayProcess | undefined;
  let gw: GatewayUnderTest | undefined;
  const clients: NostrClient[] = [];
  before(async () => {
    relay = await startRelay({ nodeId: 'relay-a', extraArgs: opts.relayArgs });
    gw = await startGateway(opts.client, opts.mode, [{ id: 'relay-a', url: relay.url }], {
      quotas: {
        keyPrefix: `nostr${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`,
        tiers: { default: { write: { points: opts.limit, windowSec: 60 } } },
      },
      ...opts.settings,
    });
  });
  after(async () => {
    for (const c of clients) c.close();
    await stopAll(gw?.proc, relay);
  });
  const started = <T>(value: T | undefined): T => {
    if (!value) throw new Error('the suite has not started yet');
    return value;
  };
  return {
    gw: () => started(gw),
    relay: () => started(relay),
    connect: async (from) => {
      const client = await NostrClient.connect(started(gw).url, from);
      clients.push(client);
      return client;
    },
  };
}
