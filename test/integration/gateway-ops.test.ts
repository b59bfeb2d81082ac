import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import { NostrClient, admin, request, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { startRelay, stopAll } from '../helpers/processes.js';
import type { SluiceProcess } from '../helpers/processes.js';

function signed(i: number, sk = generateSecretKey()) {
  return finalizeEvent(
    {
      kind: 1,
      created_at: Math.floor(Date.now() / 1000),
      tags: [],
      content: `ops ${i} ${Math.random()}`,
    },
    sk,
  );
}

async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await sleep(100);
  }
}

async function nodeHealth(gw: GatewayUnderTest): Promise<Record<string, boolean>> {
  const state = JSON.parse((await admin(gw, 'GET', '/admin/flow-control')).body) as {
    nodes: Record<string, { healthy: boolean }>;
  };
  return Object.fromEntries(Object.entries(state.nodes).map(([id, n]) => [id, n.healthy]));
}

describe('gateway operations', { timeout: 120_000 }, () => {
  let relays: SluiceProcess[];
  let gw: GatewayUnderTest;

  before(async () => {
    relays = await Promise.all([
      startRelay({ nodeId: 'relay-a' }),
      startRelay({ nodeId: 'relay-b' }),
    ]);
    gw = await startGateway(
      'ioredis',
      'standalone',
      [
        { id: 'relay-a', url: relays[0]!.url },
        { id: 'relay-b', url: relays[1]!.url },
      ],
      {
        quotas: {
          keyPrefix: `ops${Date.now()}`,
          tiers: { default: { write: { points: 10, windowSec: 30 } } },
        },
      },
    );
  });

  after(async () => {
    await stopAll(gw?.proc, ...(relays ?? []));
  });

  it('answers /healthz and /readyz, and exports decisions, frames and open sockets', async () => {
    assert.equal((await request(`${gw.adminUrl}/healthz`)).status, 200);
    const ready = await request(`${gw.adminUrl}/readyz`);
    assert.equal(ready.status, 200, ready.body);
    const nostr = await NostrClient.connect(gw.url, '127.0.5.1');
    const ev = signed(0);
    nostr.send(['EVENT', ev]);
    nostr.send(['REQ', 'x', { limit: 1 }]);
    // The EVENT's decision is counted when its OK comes back, not when the REQ's EOSE does.
    await nostr.until((m) => m.some((x) => x[0] === 'EOSE') && m.some((x) => x[0] === 'OK'));
    const metrics = (await request(`${gw.adminUrl}/metrics`)).body;
    assert.match(metrics, /sluice_websockets_open 1/);
    assert.match(metrics, /sluice_frames_total\{type="EVENT"\} 1/);
    assert.match(metrics, /sluice_frames_total\{type="REQ"\} 1/);
    // Two decisions for one new event: its sender's address, then its verified author.
    assert.match(
      metrics,
      /sluice_decisions_total\{outcome="allowed",class="write",node="relay-[ab]"\} 2/,
    );
    assert.match(metrics, /sluice_multiplier\{node="relay-a",source="default"\} 1/);
    nostr.close();
  });

  it('reloads quotas on SIGHUP without dropping an open WebSocket', async () => {
    const nostr = await NostrClient.connect(gw.url, '127.0.5.2');
    const config = JSON.parse(readFileSync(gw.configFile, 'utf8')) as {
      quotas: { tiers: { default: { write: { points: number } } } };
    };
    config.quotas.tiers.default.write.points = 3;
    writeFileSync(gw.configFile, JSON.stringify(config));
    process.kill(gw.proc.pid, 'SIGHUP');
    await waitFor(async () => {
      const state = JSON.parse((await admin(gw, 'GET', '/admin/flow-control')).body) as {
        tiers: { default: { write: { points: number } } };
      };
      return state.tiers.default.write.points === 3;
    });
    const author = generateSecretKey();
    const events = Array.from({ length: 5 }, (_, i) => signed(i, author));
    for (const ev of events) nostr.send(['EVENT', ev]);
    await nostr.until((m) => m.filter((x) => x[0] === 'OK').length >= 5);
    assert.equal(nostr.ws.readyState, nostr.ws.OPEN, 'the connection survived the reload');
    assert.equal(nostr.oks().filter((m) => m[2] === true).length, 3);
    nostr.close();
  });

  it('rejects a broken file on SIGHUP and keeps the running configuration', async () => {
    const good = readFileSync(gw.configFile, 'utf8');
    writeFileSync(gw.configFile, '{"listen": ');
    process.kill(gw.proc.pid, 'SIGHUP');
    await waitFor(() => /reload rejected/.test(gw.proc.output()));
    writeFileSync(gw.configFile, good);
    assert.equal((await request(`${gw.adminUrl}/healthz`)).status, 200);
  });

  it('takes a dead relay node out of rotation and brings it back', async () => {
    const port = relays[1]!.port;
    await relays[1]!.stop();
    await waitFor(async () => (await nodeHealth(gw))['relay-b'] === false);
    // Every client now lands on relay-a: writes keep working.
    for (let i = 0; i < 4; i++) {
      const res = await request(`${gw.url}/events`, {
        method: 'POST',
        body: JSON.stringify(signed(i)),
        from: `127.0.6.${i + 1}`,
      });
      assert.equal(res.status, 200, res.body);
    }
    relays[1] = await startRelay({ nodeId: 'relay-b', extraArgs: ['--port', String(port)] });
    await waitFor(async () => (await nodeHealth(gw))['relay-b'] === true);
  });

  it('closes WebSockets with 1001 on shutdown', async () => {
    const nostr = await NostrClient.connect(gw.url, '127.0.5.3');
    const closed = new Promise<number>((resolve) =>
      nostr.ws.once('close', (code) => resolve(code)),
    );
    assert.equal(await gw.proc.stop(), 0);
    assert.equal(await closed, 1001);
  });
});
