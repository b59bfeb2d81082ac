/**
 * The two kinds of flood against a node under pressure, end to end: a gateway process, real
 * Valkey, a reference relay, the node's multiplier set through POST /admin/flow-control.
 * Forty identities (distinct loopback addresses and authors), each far under its own quota:
 * at m = 1 every write passes; at m = 0.5 the node's write budget holds what all of them get
 * in per window to budget x 0.5, with 429s and OK false that say the relay is under memory
 * pressure. A heavy writer is refused by its own cap first, without drawing on the budget.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Event } from 'nostr-tools/pure';
import { QUOTA_EXCEEDED } from '../../src/quota/responses.js';
import { addressSource, freshAuthor, storedAt } from '../helpers/clients.js';
import type { TestAuthor } from '../helpers/clients.js';
import { uniquePrefix } from '../helpers/env.js';
import {
  NostrClient,
  admin,
  metricValue,
  request,
  suiteRelayAndGateway,
} from '../helpers/gateway.js';
import type { HttpResult } from '../helpers/gateway.js';
import { inBatches } from '../helpers/raw-socket.js';

/** Per identity: 20 writes per 60 s (10 at m = 0.5). The node: 40 per 60 s (20 at m = 0.5). */
const QUOTA = 20;
const BUDGET = 40;
const IDENTITIES = 40;

const suite = suiteRelayAndGateway(
  {
    quotas: {
      keyPrefix: uniquePrefix('budget'),
      tiers: { default: { write: { points: QUOTA, windowSec: 60 } } },
    },
  },
  [],
  { writeBudget: { points: BUDGET, windowSec: 60 } },
);
const freshAddress = addressSource(20);

interface Writer {
  from: string;
  author: TestAuthor;
  sent: number;
}

interface ProblemBody {
  type: string;
  status: number;
  detail: string;
  'violated-policies': string[];
}

interface BudgetView {
  points: number;
  windowSec: number;
  inForce: boolean;
  effective: number;
  consumed: number | null;
}

function post(w: Writer): Promise<HttpResult> {
  const event: Event = w.author.event(w.sent++);
  return request(`${suite.gw().url}/events`, {
    method: 'POST',
    body: JSON.stringify(event),
    from: w.from,
  });
}

async function setMultiplier(multiplier: number | null): Promise<void> {
  const res = await admin(suite.gw(), 'POST', '/admin/flow-control', {
    nodes: { 'relay-a': { multiplier } },
  });
  assert.equal(res.status, 200, res.body);
}

async function budgetView(): Promise<BudgetView> {
  const res = await admin(suite.gw(), 'GET', '/admin/flow-control');
  return (JSON.parse(res.body) as { nodes: Record<string, { writeBudget: BudgetView }> }).nodes[
    'relay-a'
  ]!.writeBudget;
}

const limitedByBudget = () =>
  metricValue(suite.gw(), 'sluice_node_budget_decisions_total', 'outcome="limited",node="relay-a"');

describe('a node write budget against a wave of light identities', { timeout: 180_000 }, () => {
  const wave: Writer[] = Array.from({ length: IDENTITIES }, () => ({
    from: freshAddress(),
    author: freshAuthor(),
    sent: 0,
  }));
  const heavy: Writer = { from: freshAddress(), author: freshAuthor(), sent: 0 };
  let admittedUnderPressure = 0;

  it('at m = 1 every write of every identity passes, and the budget is not charged', async () => {
    const results = await inBatches([...wave, ...wave], 8, (w) => post(w));
    assert.deepEqual(
      results.map((r) => r.status),
      Array<number>(2 * IDENTITIES).fill(200),
    );
    const view = await budgetView();
    assert.deepEqual([view.points, view.inForce, view.consumed], [BUDGET, false, null]);
    assert.equal(await limitedByBudget(), 0);
  });

  it('at m = 0.5 a heavy writer is refused by its own cap first, not drawing on the budget', async () => {
    await setMultiplier(0.5);
    const results: HttpResult[] = [];
    for (let i = 0; i < QUOTA * 0.5 + 5; i++) results.push(await post(heavy));
    const admitted = results.filter((r) => r.status === 200).length;
    assert.equal(admitted, QUOTA * 0.5, 'its cap at m = 0.5');
    admittedUnderPressure += admitted;
    const refused = results.at(-1)!;
    assert.equal(refused.status, 429);
    const body = JSON.parse(refused.body) as ProblemBody;
    assert.deepEqual(body['violated-policies'], ['writes']);
    assert.match(body.detail, /^relay under memory pressure: write quota of 10 per 60 s/);
    const view = await budgetView();
    assert.deepEqual(
      [view.inForce, view.effective, view.consumed],
      [true, BUDGET * 0.5, admitted],
      'the budget holds only the writes its cap admitted',
    );
  });

  it('at m = 0.5 the wave gets only what is left of budget x 0.5; refusals say pressure', async () => {
    const limitedBefore = await limitedByBudget();
    const results = await inBatches(wave, 8, (w) => post(w));
    const admitted = results.filter((r) => r.status === 200).length;
    admittedUnderPressure += admitted;
    assert.ok(
      admittedUnderPressure <= BUDGET * 0.5,
      `${admittedUnderPressure} admitted in the window, over budget x 0.5`,
    );
    assert.equal(admitted, BUDGET * 0.5 - QUOTA * 0.5, 'what the heavy writer left of the budget');
    const refusals = results.filter((r) => r.status !== 200);
    assert.equal(refusals.length, IDENTITIES - admitted);
    for (const r of refusals) {
      assert.equal(r.status, 429, r.body);
      const body = JSON.parse(r.body) as ProblemBody;
      assert.equal(body.type, QUOTA_EXCEEDED);
      assert.deepEqual(body['violated-policies'], ['node-budget']);
      assert.match(body.detail, /^relay under memory pressure: /);
      assert.match(
        String(r.headers['ratelimit-policy']),
        /^"writes";q=10;w=60, "node-budget";q=20;w=60$/,
      );
      assert.match(String(r.headers.ratelimit), /"node-budget";r=0;t=\d+$/);
      assert.ok(Number(r.headers['retry-after']) >= 1);
    }
    assert.equal((await limitedByBudget()) - limitedBefore, refusals.length);
    // What the relay holds is what was admitted: two each at m = 1, then the wave's share.
    let stored = 0;
    for (const w of wave) stored += await storedAt(suite.relay().url, w.author.pubkey);
    assert.equal(stored, 2 * IDENTITIES + admitted);
    assert.equal(await storedAt(suite.relay().url, heavy.author.pubkey), QUOTA * 0.5);
  });

  it('over Nostr the refusal is OK false, rate-limited: relay under memory pressure', async () => {
    const w: Writer = { from: freshAddress(), author: freshAuthor(), sent: 0 };
    const nostr = await NostrClient.connect(suite.gw().url, w.from);
    try {
      const event = w.author.event(0);
      const ok = await nostr.okFor(event.id, ['EVENT', event]);
      assert.equal(ok[2], false);
      assert.match(String(ok[3]), /^rate-limited: relay under memory pressure, retry in \d+s$/);
    } finally {
      nostr.close();
    }
  });

  it('back at m = 1 the budget charges nothing and the wave writes again', async () => {
    await setMultiplier(null);
    const results = await inBatches(wave.slice(0, 10), 8, (w) => post(w));
    assert.deepEqual(
      results.map((r) => r.status),
      Array<number>(10).fill(200),
    );
  });
});
