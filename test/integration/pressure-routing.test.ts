import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import { NostrClient, admin, request, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { startFeed, startRelay, stopAll } from '../helpers/processes.js';
import { clearLawParams } from '../helpers/pressure.js';
import type { RelayProcess, SluiceProcess } from '../helpers/processes.js';

/** Which relay stores an event sent on a new WebSocket from `from`. */
async function landsOn(
  gw: GatewayUnderTest,
  relays: RelayProcess[],
  from: string,
): Promise<number> {
  const nostr = await NostrClient.connect(gw.url, from);
  const ev = finalizeEvent(
    {
      kind: 1,
      created_at: Math.floor(Date.now() / 1000),
      tags: [],
      content: `${from} ${Math.random()}`,
    },
    generateSecretKey(),
  );
  nostr.send(['EVENT', ev]);
  await nostr.until((m) => m.some((x) => x[0] === 'OK' && x[1] === ev.id));
  nostr.close();
  for (const [i, relay] of relays.entries()) {
    const found = JSON.parse((await request(`${relay.url}/events?ids=${ev.id}`)).body) as unknown[];
    if (found.length === 1) return i;
  }
  throw new Error('stored nowhere');
}

describe('pressure-aware routing', { timeout: 120_000 }, () => {
  let relays: RelayProcess[];
  let feeds: SluiceProcess[];
  let gw: GatewayUnderTest;

  before(async () => {
    await clearLawParams('ioredis', 'standalone', ['relay-a', 'relay-b']);
    relays = await Promise.all([
      startRelay({ nodeId: 'relay-a' }),
      startRelay({ nodeId: 'relay-b' }),
    ]);
    feeds = await Promise.all(
      relays.map((r, i) =>
        startFeed({
          nodeId: i === 0 ? 'relay-a' : 'relay-b',
          relayUrl: r.url,
          targetBytes: '4GiB',
          tickMs: 200,
          client: 'ioredis',
          mode: 'standalone',
        }),
      ),
    );
    gw = await startGateway(
      'ioredis',
      'standalone',
      [
        { id: 'relay-a', url: relays[0]!.url },
        { id: 'relay-b', url: relays[1]!.url },
      ],
      {
        quotas: { keyPrefix: `route${Date.now()}` },
        pressure: { enabled: true, evaluateMs: 100, avoidEmergency: true },
      },
    );
  });

  after(async () => {
    try {
      // The law's parameters live in Valkey: later files must not inherit relay-a's emergency band.
      if (gw) await admin(gw, 'POST', '/admin/flow-control', { law: { params: {} } });
    } finally {
      await stopAll(gw?.proc, ...(feeds ?? []), ...(relays ?? []));
    }
  });

  it('sends new connections away from a node in emergency while another can take them', async () => {
    // Addresses whose sticky node is relay-a while no node is in emergency.
    const toA: string[] = [];
    for (let i = 2; i < 40 && toA.length < 3; i++) {
      const from = `127.0.7.${i}`;
      if ((await landsOn(gw, relays, from)) === 0) toA.push(from);
    }
    assert.equal(toA.length, 3, 'found clients of relay-a');

    // An emergency threshold below any real memory puts relay-a's feed into emergency.
    await admin(gw, 'POST', '/admin/flow-control', {
      law: {
        nodes: ['relay-a'],
        params: { uLo: 0.0001, uHi: 0.0005, uExit: 0.0008, uEmerg: 0.001 },
      },
    });
    const deadline = Date.now() + 10_000;
    for (;;) {
      const state = JSON.parse((await admin(gw, 'GET', '/admin/flow-control')).body) as {
        nodes: Record<string, { emergency: boolean }>;
      };
      if (state.nodes['relay-a']!.emergency) break;
      assert.ok(Date.now() < deadline, 'relay-a entered emergency');
      await sleep(100);
    }
    for (const from of toA)
      assert.equal(await landsOn(gw, relays, from), 1, `${from} now lands on relay-b`);
  });
});
