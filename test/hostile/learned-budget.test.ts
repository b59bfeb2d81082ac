/**
 * Attack on the learned write budget's input paths (issue 30): whoever can write to Valkey,
 * or flood the gateway, tries to open a node or shrink its budget.
 *
 * - Forged and garbage budgets on the pressure channel and key (negative, fractional, absurd,
 *   not numbers, not JSON): each is ignored on its own, the report's m still counts, the last
 *   good budget stays in force (a node is never opened by garbage), the gateway never fails.
 * - A flood of writes refused by their own quota adds nothing to what the feed reads as
 *   admitted: only forwarded writes are tallied, so refusals cannot teach the node's feed
 *   that it drains less.
 * - Garbage in the admitted counter and in the feed's saved estimate: the feed keeps running
 *   and publishes no made-up budget.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createStore, admittedKey } from '../../src/store/index.js';
import type { Store } from '../../src/store/index.js';
import { learnedBudgetKey } from '../../src/pressure/feed/feed.js';
import { PRESSURE_CHANNEL, pressureKey } from '../../src/pressure/report.js';
import type { PressureReport } from '../../src/pressure/report.js';
import { addressSource, freshAuthor } from '../helpers/clients.js';
import { storeOptions, uniquePrefix } from '../helpers/env.js';
import { admin, request, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { startFeed, startRelay } from '../helpers/processes.js';
import type { RelayProcess, SluiceProcess } from '../helpers/processes.js';

const NODE = 'relay-hostile-budget';

interface NodeView {
  multiplier: number;
  writeBudget?: { points: number; source: string; learned: { points: number } | null };
}

describe('the learned budget under attack', { timeout: 120_000 }, () => {
  let relay: RelayProcess;
  let gw: GatewayUnderTest;
  let store: Store;
  let seq = 0;
  const freshAddress = addressSource(24);

  const node = async (): Promise<NodeView> => {
    const res = await admin(gw, 'GET', '/admin/flow-control');
    assert.equal(res.status, 200, res.body);
    return (JSON.parse(res.body) as { nodes: Record<string, NodeView> }).nodes[NODE]!;
  };

  const report = (m: number, extra: Record<string, unknown> = {}): string =>
    JSON.stringify({
      ...({
        node: NODE,
        m,
        u: 0.9,
        uhat: 0.9,
        mode: 'normal',
        seq: ++seq,
        ts: Date.now(),
        law: 'lead',
      } satisfies PressureReport),
      ...extra,
    });

  /** As a feed would: the key, then the message. */
  const forge = async (text: string): Promise<void> => {
    await store.kv.setWithLease(pressureKey(NODE), text, 60_000);
    await store.kv.publish(PRESSURE_CHANNEL, text);
  };

  before(async () => {
    store = await createStore(storeOptions('iovalkey', 'standalone'));
    await store.kv.del(learnedBudgetKey(NODE));
    await store.kv.del(admittedKey(NODE));
    relay = await startRelay({ nodeId: NODE });
    gw = await startGateway('iovalkey', 'standalone', [{ id: NODE, url: relay.url }], {
      pressure: { enabled: true, freshReportsToTrust: 1 },
      quotas: {
        keyPrefix: uniquePrefix('hostile-budget'),
        tiers: { default: { write: { points: 5, windowSec: 60 } } },
      },
    });
  });

  after(async () => {
    await gw?.proc.stop();
    await relay?.stop();
    await store?.kv.del(pressureKey(NODE));
    await store?.close();
  });

  it('forged budgets are ignored one by one; the last good one stays in force', async () => {
    await forge(report(0.4, { budget: { points: 30, bytesPerSec: 30_000 } }));
    for (let i = 0; (await node()).writeBudget?.learned?.points !== 30; i++) {
      assert.ok(i < 100, 'the good budget arrives');
      await sleep(50);
    }
    const garbage: unknown[] = [
      { points: -1, bytesPerSec: 1 },
      { points: 0, bytesPerSec: 1 },
      { points: 2.5, bytesPerSec: 1 },
      { points: 1e15, bytesPerSec: 1 },
      { points: 10, bytesPerSec: 1e300 },
      { points: 10, bytesPerSec: -5 },
      { points: '1000000', bytesPerSec: 1 },
      { points: 10 },
      'NaN',
      null,
      [1, 2],
      { points: { $gt: 0 }, bytesPerSec: 1 },
      'x'.repeat(100_000),
    ];
    let m = 0.4;
    for (const budget of garbage) {
      m = Math.round((m - 0.02) * 100) / 100; // lower each time: a drop applies at once
      await forge(report(m, { budget }));
      for (let i = 0; (await node()).multiplier !== m; i++) {
        assert.ok(i < 100, `the report carrying ${JSON.stringify(budget).slice(0, 40)} applied`);
        await sleep(20);
      }
      const view = await node();
      assert.equal(view.writeBudget?.learned?.points, 30, 'the last good budget is kept');
      assert.equal(view.writeBudget?.source, 'learned');
    }
    // Not a report at all: nothing changes, nothing fails.
    for (const text of [
      '{',
      'null',
      '[]',
      '"budget"',
      `{"node":"${NODE}","budget":{"points":1}}`,
    ]) {
      await forge(text);
    }
    await sleep(200);
    assert.equal((await node()).writeBudget?.learned?.points, 30);
    const metrics = (await admin(gw, 'GET', '/metrics')).body;
    const internal = metrics
      .split('\n')
      .filter((l) => l.startsWith('sluice_internal_errors_total'))
      .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
    assert.equal(internal, 0, 'no internal error');
  });

  it('a flood refused by its own quota adds nothing to what the feed reads as admitted', async () => {
    // m pinned at 1: the writer's own quota is all that refuses it.
    const pinned = await admin(gw, 'POST', '/admin/flow-control', {
      nodes: { [NODE]: { multiplier: 1 } },
    });
    assert.equal(pinned.status, 200, pinned.body);
    const before = await store.admitted.read(NODE);
    const author = freshAuthor();
    const from = freshAddress();
    const bodies: number[] = [];
    const statuses: number[] = [];
    for (let i = 0; i < 40; i++) {
      const body = JSON.stringify(author.event(i));
      const res = await request(`${gw.url}/events`, { method: 'POST', body, from });
      statuses.push(res.status);
      if (res.status === 200) bodies.push(Buffer.byteLength(body));
    }
    assert.equal(bodies.length, 5, 'its quota of 5 per 60 s');
    assert.equal(statuses.filter((s) => s === 429).length, 35);
    await sleep(600); // two flushes of the tally
    const now = await store.admitted.read(NODE);
    assert.equal(now.points - before.points, 5, 'only the forwarded writes are counted');
    assert.equal(
      now.bytes - before.bytes,
      bodies.reduce((a, b) => a + b, 0),
    );
  });

  it('garbage in the admitted counter and the saved estimate: the feed publishes no made-up budget', async () => {
    let feed: SluiceProcess | undefined;
    try {
      await store.kv.set(learnedBudgetKey(NODE), '{"bytesPerSec":"lots","maxMeasured":-1}');
      await store.kv.del(admittedKey(NODE));
      feed = await startFeed({
        nodeId: NODE,
        relayUrl: relay.url,
        targetBytes: '4GiB',
        tickMs: 200,
        client: 'iovalkey',
        mode: 'standalone',
        keepLearned: true, // it reads the garbage estimate, not drops it
      });
      // Someone writes text where the counts go: the feed's read fails, the step is skipped.
      await store.kv.set(admittedKey(NODE), 'not a hash');
      await sleep(1500);
      const health = await fetch(`${feed.url}/healthz`);
      const body = (await health.json()) as { status: string; last: PressureReport | null };
      assert.equal(body.status, 'ok');
      assert.ok(body.last, 'the feed still reports m');
      assert.equal(body.last.budget, undefined, 'no budget from garbage');
    } finally {
      await feed?.stop();
      await store.kv.del(learnedBudgetKey(NODE));
      await store.kv.del(admittedKey(NODE));
    }
  });
});
