/**
 * The node write budget learned, not configured (issue 30), end to end: a reference relay
 * draining 4 KiB/s, its feed (`--relay`: memory, backlog and the relay's own drain), a
 * gateway process with pressure on and no writeBudget, real Valkey. Writes from many
 * identities at about three times the drain teach the feed what the node drains; the feed
 * publishes it beside m; the gateway applies it. Then, at m = 0.5 (pinned by the admin
 * endpoint), a spam wave of identities each far under its own quota is held to the learned
 * budget x 0.5, refusals naming the node budget.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Event } from 'nostr-tools/pure';
import { createStore, admittedKey } from '../../src/store/index.js';
import { learnedBudgetKey } from '../../src/pressure/feed/feed.js';
import { NODE_BUDGET_KEY } from '../../src/nostr/relay-info-document.js';
import { addressSource, freshAuthor } from '../helpers/clients.js';
import type { TestAuthor } from '../helpers/clients.js';
import { storeOptions, uniquePrefix } from '../helpers/env.js';
import { admin, request, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest, HttpResult } from '../helpers/gateway.js';
import { startFeed, startRelay } from '../helpers/processes.js';
import type { RelayProcess, SluiceProcess } from '../helpers/processes.js';
import { inBatches } from '../helpers/raw-socket.js';

const NODE = 'relay-learned';
const DRAIN = 4096;

interface Writer {
  from: string;
  author: TestAuthor;
  sent: number;
}

interface BudgetView {
  points: number;
  windowSec: number;
  source: 'configured' | 'learned';
  configured: unknown;
  learned: { points: number; bytesPerSec: number } | null;
  inForce: boolean;
  effective: number;
}

describe('a write budget the feed learned holds a spam wave', { timeout: 180_000 }, () => {
  let relay: RelayProcess;
  let feed: SluiceProcess;
  let gw: GatewayUnderTest;
  const freshAddress = addressSource(23);
  const wave: Writer[] = Array.from({ length: 150 }, () => ({
    from: freshAddress(),
    author: freshAuthor(),
    sent: 0,
  }));

  const post = (w: Writer): Promise<HttpResult> => {
    const event: Event = w.author.event(w.sent++);
    return request(`${gw.url}/events`, {
      method: 'POST',
      body: JSON.stringify(event),
      from: w.from,
    });
  };

  const view = async (): Promise<BudgetView | undefined> => {
    const res = await admin(gw, 'GET', '/admin/flow-control');
    const body = JSON.parse(res.body) as { nodes: Record<string, { writeBudget?: BudgetView }> };
    return body.nodes[NODE]?.writeBudget;
  };

  before(async () => {
    // A node id of its own, and nothing left from an earlier run: the feed learns from zero.
    const store = await createStore(storeOptions('iovalkey', 'standalone'));
    await store.kv.del(learnedBudgetKey(NODE));
    await store.kv.del(admittedKey(NODE));
    await store.close();
    relay = await startRelay({ nodeId: NODE, drainBytesPerSec: DRAIN });
    feed = await startFeed({
      nodeId: NODE,
      relayUrl: relay.url,
      targetBytes: '4GiB', // the feed's own m stays 1: the test pins m at the gateway
      tickMs: 200,
      client: 'iovalkey',
      mode: 'standalone',
    });
    gw = await startGateway('iovalkey', 'standalone', [{ id: NODE, url: relay.url }], {
      pressure: { enabled: true },
      quotas: {
        keyPrefix: uniquePrefix('learned'),
        tiers: { default: { write: { points: 1000, windowSec: 60 } } },
      },
    });
  });

  after(async () => {
    await gw?.proc.stop();
    await feed?.stop();
    await relay?.stop();
  });

  it('learns what the node drains from writes past it, and publishes it as the budget', async () => {
    assert.equal(await view(), undefined, 'no budget before anything was learned');
    // A gateway starts at the safe multiplier and trusts the feed after a few reports: the
    // learning phase runs at m = 1, where no budget is in force.
    for (let tries = 0; ; tries++) {
      const res = await admin(gw, 'GET', '/admin/flow-control');
      const body = JSON.parse(res.body) as { nodes: Record<string, { multiplier: number }> };
      if (body.nodes[NODE]!.multiplier === 1) break;
      assert.ok(tries < 200, 'the feed is trusted within 20 s');
      await sleep(100);
    }
    // About 3 x the drain for 8 s, from the whole wave (each far under its quota).
    const until = Date.now() + 8000;
    let i = 0;
    while (Date.now() < until) {
      const batch = Array.from({ length: 5 }, () => wave[i++ % wave.length]!);
      const results = await inBatches(batch, 5, post);
      for (const r of results) assert.equal(r.status, 200, r.body);
      await sleep(100);
    }
    let v: BudgetView | undefined;
    for (let tries = 0; tries < 100; tries++) {
      v = await view();
      if (v?.learned && v.learned.bytesPerSec >= 0.8 * DRAIN) break;
      await sleep(100);
    }
    assert.ok(v?.learned, 'a budget was learned');
    assert.equal(v.source, 'learned');
    assert.equal(v.configured, null);
    assert.ok(
      v.learned.bytesPerSec >= 0.8 * DRAIN && v.learned.bytesPerSec <= 1.25 * DRAIN,
      `learned ${v.learned.bytesPerSec} bytes/s, the relay drains ${DRAIN}`,
    );
    assert.equal(v.inForce, false, 'not in force at m = 1');
  });

  it('at m = 0.5 a spam wave of light identities is held to the learned budget x 0.5', async () => {
    const res = await admin(gw, 'POST', '/admin/flow-control', {
      nodes: { [NODE]: { multiplier: 0.5 } },
    });
    assert.equal(res.status, 200, res.body);
    const v = (await view())!;
    assert.equal(v.inForce, true);
    const perSec = v.effective;
    assert.ok(perSec >= 1 && perSec < v.learned!.points, `in force: ${perSec}/s`);
    const started = Date.now();
    const results = await inBatches(wave, 16, post);
    const seconds = Math.ceil((Date.now() - started) / 1000) + 1;
    const admitted = results.filter((r) => r.status === 200).length;
    assert.ok(admitted >= 1, 'some of the wave gets in');
    assert.ok(
      admitted <= perSec * seconds,
      `${admitted} admitted in ${seconds} windows of ${perSec}`,
    );
    const refused = results.filter((r) => r.status !== 200);
    assert.ok(refused.length >= wave.length - perSec * seconds);
    for (const r of refused) {
      assert.equal(r.status, 429, r.body);
      const body = JSON.parse(r.body) as { 'violated-policies': string[]; detail: string };
      assert.deepEqual(body['violated-policies'], ['node-budget']);
      assert.match(body.detail, /^relay under memory pressure: /);
    }
    // NIP-11 through the gateway carries the learned budget in force.
    const nip11 = await request(`${gw.url}/`, { headers: { accept: 'application/nostr+json' } });
    assert.equal(nip11.status, 200, nip11.body);
    const doc = JSON.parse(nip11.body) as Record<
      string,
      { base_points: number; in_force: boolean } | undefined
    >;
    const shown = doc[NODE_BUDGET_KEY];
    assert.ok(shown, 'the budget is in the document');
    assert.equal(shown.in_force, true);
    assert.ok(shown.base_points >= 1 && shown.base_points <= v.learned!.points * 2);
    // The refused writes taught the feed nothing: its budget did not fall.
    await sleep(1500);
    const after = (await view())!;
    assert.ok(
      after.learned!.bytesPerSec >= v.learned!.bytesPerSec * 0.99,
      `the estimate fell from ${v.learned!.bytesPerSec} to ${after.learned!.bytesPerSec}`,
    );
  });
});
