import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { admin, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { startFeed, startRelay, stopAll } from '../helpers/processes.js';
import { clearLawParams } from '../helpers/pressure.js';
import type { RelayProcess, SluiceProcess } from '../helpers/processes.js';

interface NodeView {
  multiplier: number;
  source: string;
  override: boolean;
  feedState: string | null;
}

async function view(gw: GatewayUnderTest): Promise<NodeView> {
  const body = JSON.parse((await admin(gw, 'GET', '/admin/flow-control')).body) as {
    nodes: Record<string, NodeView>;
  };
  return body.nodes['relay-a']!;
}

async function until(
  what: string,
  check: (v: NodeView) => boolean,
  gw: GatewayUnderTest,
  timeoutMs = 10_000,
) {
  const deadline = Date.now() + timeoutMs;
  let v = await view(gw);
  while (!check(v)) {
    if (Date.now() > deadline) throw new Error(`${what}: last view ${JSON.stringify(v)}`);
    await sleep(100);
    v = await view(gw);
  }
  return v;
}

describe('runtime flow control of adaptation', { timeout: 120_000 }, () => {
  let relay: RelayProcess;
  let feed: SluiceProcess;
  let gw: GatewayUnderTest;

  before(async () => {
    await clearLawParams('iovalkey', 'standalone', ['relay-a']);
    relay = await startRelay({ nodeId: 'relay-a' });
    feed = await startFeed({
      nodeId: 'relay-a',
      relayUrl: relay.url,
      targetBytes: '4GiB',
      tickMs: 200,
      client: 'iovalkey',
      mode: 'standalone',
    });
    gw = await startGateway('iovalkey', 'standalone', [{ id: 'relay-a', url: relay.url }], {
      quotas: { keyPrefix: `padmin${Date.now()}` },
      pressure: { enabled: true, evaluateMs: 100, staleAfterMs: 600, holdMs: 500, rampUpPerSec: 1 },
    });
    await until('feed trusted at 1.0', (v) => v.feedState === 'fresh' && v.multiplier === 1, gw);
  });

  after(async () => {
    try {
      // The law's parameters live in Valkey: later files must not inherit a test's band.
      if (gw) await admin(gw, 'POST', '/admin/flow-control', { law: { params: {} } });
    } finally {
      await stopAll(gw?.proc, feed, relay);
    }
  });

  it('pins a node with a static override and hands it back to the feed with null', async () => {
    await admin(gw, 'POST', '/admin/flow-control', { nodes: { 'relay-a': { multiplier: 0.3 } } });
    let v = await view(gw);
    assert.deepEqual([v.multiplier, v.source, v.override], [0.3, 'admin', true]);
    // Feed reports keep arriving (every 200 ms): the override holds through several of them.
    for (const holdUntil = Date.now() + 600; Date.now() < holdUntil; await sleep(100)) {
      assert.equal((await view(gw)).multiplier, 0.3);
    }
    await admin(gw, 'POST', '/admin/flow-control', { nodes: { 'relay-a': { multiplier: null } } });
    v = await until('back to the feed', (x) => x.source === 'feed', gw);
    assert.equal(v.override, false);
  });

  it('turns adaptation off (base quotas) and on again', async () => {
    await admin(gw, 'POST', '/admin/flow-control', { adaptation: { enabled: false } });
    assert.deepEqual([(await view(gw)).source, (await view(gw)).multiplier], ['default', 1]);
    await admin(gw, 'POST', '/admin/flow-control', { adaptation: { enabled: true } });
    await until('feed again', (v) => v.source === 'feed', gw);
  });

  it("changes the law's parameters in the running feed", async () => {
    // A band far below the relay's memory: the feed must cut the multiplier to its floor.
    const res = await admin(gw, 'POST', '/admin/flow-control', {
      law: { params: { uLo: 0.001, uHi: 0.002, uEmerg: 100 } },
    });
    assert.equal(res.status, 200, res.body);
    const stored = JSON.parse((await admin(gw, 'GET', '/admin/flow-control/law')).body) as {
      params: Record<string, unknown>;
    };
    assert.deepEqual(stored.params['relay-a'], { uLo: 0.001, uHi: 0.002, uEmerg: 100 });
    await until('feed applies the new band', (v) => v.source === 'feed' && v.multiplier <= 0.1, gw);
    await admin(gw, 'POST', '/admin/flow-control', { law: { params: {} } });
    await until('defaults restored', (v) => v.multiplier === 1, gw, 15_000);
  });

  it('refuses a combination no law accepts, before any feed sees it', async () => {
    const res = await admin(gw, 'POST', '/admin/flow-control', {
      law: { params: { uLo: 0.9, uHi: 0.5 } },
    });
    assert.equal(res.status, 400);
    assert.match(res.body, /uLo must be below uHi/);
  });

  it('refuses unknown law parameters and unknown nodes, naming them', async () => {
    const bad = await admin(gw, 'POST', '/admin/flow-control', { law: { params: { gain: 3 } } });
    assert.equal(bad.status, 400);
    assert.match(bad.body, /law\.params\.gain: not a parameter of any control law/);
    const node = await admin(gw, 'POST', '/admin/flow-control', {
      law: { nodes: ['relay-z'], params: {} },
    });
    assert.equal(node.status, 400);
    assert.match(node.body, /relay-z/);
  });
});
