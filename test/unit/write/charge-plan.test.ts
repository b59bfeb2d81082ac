/**
 * The charge plan's refunds, each alone, with a fake charger (pure logic): a fee is all the
 * senders or none, a write is all its payers and the node's budget or none, the relay's
 * refusal gives the write back and keeps the fee; a sender's refused charge stands, a payer's
 * is given back. scripts/mutate-refunds.mjs removes each refund in turn: each must fail a test here.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { QuotaDecision, QuotaRequest } from '../../../src/quota/decider.js';
import type { Charger } from '../../../src/quota/charger.js';
import { makeIdentity } from '../../../src/quota/policy.js';
import type { Identity } from '../../../src/quota/policy.js';
import { ChargePlan } from '../../../src/write/charge-plan.js';

function decision(admitted: boolean): QuotaDecision {
  return {
    outcome: admitted ? 'allowed' : 'limited',
    admitted,
    policy: 'writes',
    limit: 5,
    windowSec: 60,
    remaining: admitted ? 1 : 0,
    resetSec: 60,
    multiplier: 1,
    fromMemory: false,
    receipt: { into: 'store', until: Number.MAX_SAFE_INTEGER },
  };
}

/** Each identity's net points, charged and given back; refusals named by raw identity. */
class FakeCharger {
  readonly net = new Map<string, number>();
  constructor(
    private readonly refuse: ReadonlySet<string>,
    private readonly budget: 'none' | 'admit' | 'refuse' = 'none',
  ) {}
  private add(raw: string, n: number): void {
    this.net.set(raw, (this.net.get(raw) ?? 0) + n);
  }
  take(req: QuotaRequest): Promise<QuotaDecision | null> {
    this.add(req.identity.raw, req.cost);
    return Promise.resolve(decision(!this.refuse.has(req.identity.raw)));
  }
  takeNode(req: QuotaRequest): Promise<QuotaDecision | null> | null {
    if (this.budget === 'none') return null;
    this.add('node', req.cost);
    return Promise.resolve({ ...decision(this.budget === 'admit'), policy: 'node-budget' });
  }
  giveBack(req: QuotaRequest, d: QuotaDecision | null): Promise<void> {
    if (d?.receipt) this.add(req.identity.raw, -req.cost);
    return Promise.resolve();
  }
}

const id = (raw: string): Identity => makeIdentity('ip', raw, 'default', 'salt');
const [ADDRESS, AUTH, AUTHOR, TIER] = ['address', 'auth', 'author', 'tier'].map(id) as [
  Identity,
  Identity,
  Identity,
  Identity,
];

function planOf(refuse: string[], budget: 'none' | 'admit' | 'refuse' = 'none') {
  const charger = new FakeCharger(new Set(refuse), budget);
  const plan = new ChargePlan(charger as unknown as Charger, {
    ip: '192.0.2.1',
    nodeId: 'relay-a',
    cost: 1,
    budgetPayer: ADDRESS,
  });
  return { plan, net: (raw: string) => charger.net.get(raw) ?? 0 };
}

describe('the charge plan: all or none, and what the relay settles', { timeout: 10_000 }, () => {
  it('a fee refused by one sender gives back what the others paid; the refused keeps its count', async () => {
    const { plan, net } = planOf(['auth']);
    const refused = await plan.payFee([ADDRESS, AUTH]);
    assert.equal(refused?.by, 'sender');
    assert.equal(net('address'), 0, 'the address is given back');
    assert.equal(net('auth'), 1, 'a refused charge stands (it is over its limit)');
  });

  it('a fee refused in the same turn as the write gives the write back', async () => {
    const { plan, net } = planOf(['address']);
    const refused = await plan.payWrite([AUTHOR], [ADDRESS]);
    assert.equal(refused?.by, 'sender');
    assert.equal(net('author'), 0);
    assert.deepEqual(plan.write, []);
  });

  it("a payer's refusal gives back the other payers' charges, and keeps the fee", async () => {
    const { plan, net } = planOf(['tier']);
    assert.equal(await plan.payFee([ADDRESS]), undefined);
    const refused = await plan.payWrite([AUTHOR, TIER]);
    assert.equal(refused?.by, 'author');
    assert.equal(net('author'), 0, 'the other payer is given back');
    assert.equal(net('address'), 1, 'the fee stands');
  });

  it("the node's budget refusing gives the write back, and keeps the fee", async () => {
    const { plan, net } = planOf([], 'refuse');
    assert.equal(await plan.payFee([ADDRESS]), undefined);
    const refused = await plan.payWrite([AUTHOR]);
    assert.equal(refused?.by, 'budget');
    assert.equal(net('author'), 0);
    assert.equal(net('address'), 1);
  });

  it('the relay storing nothing gives the write back (release), once; the fee stands', async () => {
    const { plan, net } = planOf([], 'admit');
    await plan.payFee([ADDRESS]);
    assert.equal(await plan.payWrite([AUTHOR]), undefined);
    assert.equal(net('author'), 1);
    await plan.release();
    await plan.release();
    assert.equal(net('author'), 0, 'given back exactly once');
    assert.equal(net('address'), 1);
  });

  it("a payer's refused charge is given back too: an author pays only for what it was granted", async () => {
    const { plan, net } = planOf(['author']);
    await plan.payFee([ADDRESS]);
    const refused = await plan.payWrite([AUTHOR]);
    assert.equal(refused?.by, 'author');
    assert.equal(refused?.taken, undefined);
    assert.equal(net('author'), 0, 'the refused charge given back');
    assert.equal(net('address'), 1, 'the sender paid for sending it');
  });
});

/**
 * The time a refusal names (ChargePlan.longestWait): the longest wait of every counter the
 * same write would wait for. Mutations tried: longestWait returning its refusal as given (the
 * first refusal's time: fails all three), and without the kept-fee rule (fails the second).
 */
describe('the retry time covers every counter the plan saw', { timeout: 10_000 }, () => {
  const shaped = (over: Partial<QuotaDecision>): QuotaDecision => ({
    ...decision(over.admitted ?? false),
    ...over,
  });
  function scripted(answers: Record<string, QuotaDecision>, cost = 1) {
    const charger = {
      take: (req: QuotaRequest) => Promise.resolve(answers[req.identity.raw] ?? null),
      takeNode: () => null,
      giveBack: () => Promise.resolve(),
    };
    return new ChargePlan(charger as unknown as Charger, {
      ip: '192.0.2.1',
      nodeId: 'relay-a',
      cost,
      budgetPayer: ADDRESS,
    });
  }
  const RANGE = id('range');

  it('an address and its range both refuse: the range frees later, its time is named', async () => {
    const plan = scripted({
      address: shaped({ resetSec: 2 }),
      range: shaped({ resetSec: 8, limit: 8 }),
    });
    const refused = (await plan.payFee([ADDRESS, RANGE]))!;
    assert.equal(refused.decision.resetSec, 2, 'the address refused first');
    const shown = plan.longestWait(refused);
    assert.deepEqual([shown.by, shown.decision.resetSec, shown.decision.limit], ['sender', 8, 8]);
  });

  it("the author refuses; the sender's fee kept left less than the cost: its window counts", async () => {
    const plan = scripted(
      {
        address: shaped({ admitted: true, remaining: 1, resetSec: 30 }),
        author: shaped({ resetSec: 5 }),
      },
      2,
    );
    assert.equal(await plan.payFee([ADDRESS]), undefined);
    const refused = (await plan.payWrite([AUTHOR]))!;
    assert.equal(refused.by, 'author');
    const shown = plan.longestWait(refused);
    assert.deepEqual(
      [shown.by, shown.decision.admitted, shown.decision.resetSec],
      ['sender', false, 30],
    );
  });

  it('a fee kept with room, a shadow refusal, an error: none of them waits', async () => {
    const plan = scripted({
      address: shaped({ admitted: true, remaining: 3, resetSec: 30 }),
      auth: shaped({ admitted: true, outcome: 'shadow_limited', resetSec: 40 }),
      author: shaped({ resetSec: 5 }),
    });
    assert.equal(await plan.payFee([ADDRESS, AUTH]), undefined);
    const refused = (await plan.payWrite([AUTHOR]))!;
    assert.equal(plan.longestWait(refused).decision.resetSec, 5);
    const unseen = { by: 'author' as const, decision: shaped({ outcome: 'error', resetSec: 50 }) };
    assert.equal(plan.longestWait(refused, [unseen]).decision.resetSec, 5);
    const known = { by: 'author' as const, decision: shaped({ resetSec: 50 }) };
    assert.equal(plan.longestWait(refused, [known]).decision.resetSec, 50, 'a known wait counts');
  });
});
