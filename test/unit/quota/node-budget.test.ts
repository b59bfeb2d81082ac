/**
 * The node-level write budget (upstreams[].writeBudget) in process, with a fake Valkey and an
 * injected clock: its maths, when it is charged at all (never at m = 1: no round trip), the
 * shared counter per node, Valkey failures, and the order of the charges in the admission
 * step: a client's own cap first (a client it refuses never draws on the node's budget), then
 * the node's budget, whose refusals say the relay is under memory pressure.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayConfigSchema } from '../../../src/config/schema.js';
import type { GatewayConfigInput } from '../../../src/config/schema.js';
import { Admission } from '../../../src/gateway/admission.js';
import type { GatewayMetrics } from '../../../src/gateway/metrics.js';
import { UpstreamPool } from '../../../src/gateway/upstreams.js';
import { MultiplierBoard } from '../../../src/pressure/follower/board.js';
import { QuotaDecider } from '../../../src/quota/decider.js';
import type { QuotaRequest } from '../../../src/quota/decider.js';
import { NODE_BUDGET_POLICY, budgetPoints } from '../../../src/quota/node-budget.js';
import { Policy, makeIdentity } from '../../../src/quota/policy.js';
import { freshAuthor } from '../../helpers/clients.js';
import { metricsFor, silent } from '../../helpers/fake-admission-context.js';
import { FakeValkey, manualClock } from '../../helpers/fake-valkey.js';
import { LearnedBudgets, effectiveBudget } from '../../../src/pressure/budget/learned.js';

const PREFIX = 'nb';
const NODE_KEY = `${PREFIX}:node:relay-a`;

function configOf(input: Omit<GatewayConfigInput, 'admin' | 'upstreams'>, budget = 10) {
  return GatewayConfigSchema.parse({
    admin: { token: 'node-budget-admin-token-0123' },
    upstreams: [
      { id: 'relay-a', url: 'http://127.0.0.1:9', writeBudget: { points: budget } },
      { id: 'relay-b', url: 'http://127.0.0.1:10' },
    ],
    ...input,
    quotas: { keyPrefix: PREFIX, ...input.quotas },
  });
}

/** A decider over a fake Valkey, budgets as configured, writes from distinct addresses. */
function deciderSetup(
  input: Omit<GatewayConfigInput, 'admin' | 'upstreams'> = {},
  budget = 10,
  learned?: LearnedBudgets,
) {
  const config = configOf(input, budget);
  const clock = manualClock();
  const valkey = new FakeValkey(clock.now);
  const board = new MultiplierBoard(config.upstreams.map((u) => u.id));
  const budgets = new Map(
    config.upstreams.flatMap((u) => (u.writeBudget ? [[u.id, u.writeBudget] as const] : [])),
  );
  const decider = new QuotaDecider(valkey.store, new Policy(config.quotas), board, config.quotas, {
    now: clock.now,
    writeBudgets: budgets,
    ...(learned ? { learnedBudgets: learned } : {}),
    nodeCount: config.upstreams.length,
  });
  let n = 0;
  const write = (over: Partial<QuotaRequest> = {}) => {
    const ip = `192.0.2.${++n % 250}`;
    return decider.decideNode({
      identity: makeIdentity('ip', ip, 'default', 'salt'),
      ip,
      cls: 'write',
      cost: 1,
      nodeId: 'relay-a',
      ...over,
    });
  };
  return { decider, board, valkey, clock, write };
}

describe('node budget: points at a multiplier', { timeout: 10_000 }, () => {
  it('is not charged at m = 1, is budget x m below, at least 1 above 0, and 0 at 0', () => {
    const budget = { points: 100, windowSec: 1 };
    assert.equal(budgetPoints(budget, 1, 0.05), undefined);
    assert.equal(budgetPoints(budget, 0.5, 0.05), 50);
    assert.equal(budgetPoints(budget, 0.95, 0.05), 95);
    assert.equal(budgetPoints({ points: 10, windowSec: 1 }, 0.05, 0.05), 1);
    assert.equal(budgetPoints(budget, 0, 0.05), 0);
  });
});

describe('node budget: configuration', { timeout: 10_000 }, () => {
  it('takes points and a window (1 s by default), and refuses anything else, naming it', () => {
    const parse = (writeBudget: unknown) =>
      GatewayConfigSchema.safeParse({
        admin: { token: 'node-budget-admin-token-0123' },
        upstreams: [{ id: 'relay-a', url: 'http://127.0.0.1:9', writeBudget }],
      });
    const ok = parse({ points: 200 });
    assert.ok(ok.success);
    assert.deepEqual(ok.data.upstreams[0]!.writeBudget, { points: 200, windowSec: 1 });
    for (const [bad, message] of [
      [{ points: 0 }, /upstreams\.0\.writeBudget\.points/],
      [{ points: 1.5 }, /upstreams\.0\.writeBudget\.points/],
      [{ points: 10, windowSec: 0 }, /upstreams\.0\.writeBudget\.windowSec/],
      [{ points: 10, window: 2 }, /Unrecognized key: "window"/],
    ] as const) {
      const res = parse(bad);
      assert.equal(res.success, false);
      const issues = res.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
      assert.match(issues, message);
    }
  });
});

describe('QuotaDecider.decideNode', { timeout: 10_000 }, () => {
  it('costs nothing at m = 1: no decision and no Valkey call', async () => {
    const { valkey, write } = deciderSetup();
    for (let i = 0; i < 50; i++) assert.equal(await write(), null);
    assert.equal(valkey.calls, 0);
  });

  it('admits budget x m per window from one counter per node, whoever writes', async () => {
    const { board, valkey, clock, write } = deciderSetup();
    board.setOverride('relay-a', 0.5);
    const decisions = [];
    for (let i = 0; i < 8; i++) decisions.push((await write())!);
    assert.deepEqual(
      decisions.map((d) => d.admitted),
      [true, true, true, true, true, false, false, false],
    );
    const refused = decisions[5]!;
    assert.deepEqual(
      [refused.policy, refused.limit, refused.windowSec, refused.multiplier, refused.outcome],
      [NODE_BUDGET_POLICY, 5, 1, 0.5, 'limited'],
    );
    assert.equal(refused.resetSec, 1);
    // Once used up, the rest of the window is refused from memory: no round trip.
    assert.equal(valkey.calls, 5);
    assert.deepEqual(
      decisions.slice(5).map((d) => d.fromMemory),
      [true, true, true],
    );
    assert.equal(valkey.consumed(NODE_KEY), 5);
    clock.advance(1000);
    assert.equal((await write())!.admitted, true, 'a new window');
  });

  it('applies a new multiplier at once to what was consumed, and charges the write cost', async () => {
    const { board, valkey, write } = deciderSetup();
    board.setOverride('relay-a', 0.5);
    assert.equal((await write({ cost: 3 }))!.remaining, 2);
    assert.equal((await write({ cost: 3 }))!.admitted, false, '6 > 5');
    board.setOverride('relay-a', 0.8);
    const d = (await write({ cost: 2 }))!;
    assert.deepEqual([d.admitted, d.limit], [true, 8]);
    assert.equal(valkey.consumed(NODE_KEY), 8);
  });

  it('a learned budget applies where none is configured, and the smaller per second where both are', async () => {
    const learned = new LearnedBudgets();
    const { board, decider, write } = deciderSetup({}, 10, learned);
    board.setOverride('relay-a', 0.5);
    board.setOverride('relay-b', 0.5);
    // relay-b has no writeBudget: nothing until its feed has learned one, then points x m.
    assert.equal(await write({ nodeId: 'relay-b' }), null);
    learned.set('relay-b', { points: 8, bytesPerSec: 8 * 32768, ts: 1 });
    const b = [];
    for (let i = 0; i < 5; i++) b.push((await write({ nodeId: 'relay-b' }))!);
    assert.deepEqual(
      b.map((d) => d.admitted),
      [true, true, true, true, false],
    );
    assert.equal(b[4]!.limit, 4);
    // relay-a: configured 10/s; a learned 40/s does not raise it, a learned 6/s lowers it.
    learned.set('relay-a', { points: 40, bytesPerSec: 1, ts: 1 });
    assert.equal(decider.nodeBudgetNow('relay-a')!.basePoints, 10);
    learned.set('relay-a', { points: 6, bytesPerSec: 1, ts: 1 });
    assert.equal(decider.nodeBudgetNow('relay-a')!.basePoints, 6);
    assert.equal((await write())!.limit, 3);
    const state = (await decider.nodeBudgetState('relay-a'))!;
    assert.deepEqual(
      [state.source, state.points, state.configured?.points, state.learned?.points],
      ['learned', 6, 10, 6],
    );
    // Per second: a configured 120 per 60 s (2/s) stays below a learned 5/s.
    assert.deepEqual(
      effectiveBudget({ points: 120, windowSec: 60 }, { points: 5, bytesPerSec: 1, ts: 0 }),
      { budget: { points: 120, windowSec: 60 }, source: 'configured' },
    );
  });

  it('charges nothing for a node without a budget, reads, free writes, allow-listed senders, quotas off', async () => {
    const { board, valkey, write } = deciderSetup({ quotas: { allowList: ['192.0.2.77'] } });
    board.setOverride('relay-a', 0.5);
    board.setOverride('relay-b', 0.5);
    assert.equal(await write({ nodeId: 'relay-b' }), null);
    assert.equal(await write({ cls: 'read' }), null);
    assert.equal(await write({ cost: 0 }), null);
    assert.equal(await write({ ip: '192.0.2.77' }), null);
    assert.equal(valkey.calls, 0);
    const off = deciderSetup({ quotas: { enabled: false } });
    off.board.setOverride('relay-a', 0.5);
    assert.equal(await off.write(), null);
  });

  it('at m = 0 refuses without a round trip', async () => {
    const { board, valkey, write } = deciderSetup();
    board.setOverride('relay-a', 0);
    const d = (await write())!;
    assert.deepEqual([d.admitted, d.limit, d.multiplier], [false, 0, 0]);
    assert.equal(valkey.calls, 0);
  });

  it('Valkey down, insure: this gateway keeps its share of the budget in memory', async () => {
    const { board, valkey, clock, write } = deciderSetup({ quotas: { gateways: 2 } });
    board.setOverride('relay-a', 0.5);
    valkey.failing = true;
    const outcomes = [];
    for (let i = 0; i < 5; i++) outcomes.push(await write());
    // 5 points at m = 0.5, 2 gateways: a share of 3.
    assert.deepEqual(
      outcomes.map((d) => [d!.outcome, d!.admitted]),
      [
        ['insured', true],
        ['insured', true],
        ['insured', true],
        ['insured', false],
        ['insured', false],
      ],
    );
    assert.equal(valkey.calls, 1, 'Valkey skipped for retryStoreAfterMs after a failure');
    valkey.failing = false;
    clock.advance(1000);
    assert.equal((await write())!.outcome, 'allowed', 'asked again once the pause is over');
  });

  it('Valkey down, open admits and closed refuses, both as the gateway failing (error)', async () => {
    for (const [mode, admitted] of [
      ['open', true],
      ['closed', false],
    ] as const) {
      const { board, valkey, write } = deciderSetup({ quotas: { onStoreFailure: mode } });
      board.setOverride('relay-a', 0.5);
      valkey.failing = true;
      const d = (await write())!;
      assert.deepEqual([d.outcome, d.admitted], ['error', admitted], mode);
    }
  });
});

/**
 * The admission step over a real decider and a fake Valkey, one node (relay-a) with a write
 * budget: per-client cap 4 per 60 s, node budget 20 per 60 s (so 2 and 10 at m = 0.5).
 */
function admissionSetup(mode: 'enforce' | 'shadow' = 'enforce') {
  const config = GatewayConfigSchema.parse({
    admin: { token: 'node-budget-admin-token-0123' },
    upstreams: [
      { id: 'relay-a', url: 'http://127.0.0.1:9', writeBudget: { points: 20, windowSec: 60 } },
    ],
    identity: { order: ['ip'] },
    quotas: {
      keyPrefix: PREFIX,
      mode,
      tiers: { default: { write: { points: 4, windowSec: 60 } } },
    },
  });
  const clock = manualClock();
  const valkey = new FakeValkey(clock.now);
  const policy = new Policy(config.quotas);
  const board = new MultiplierBoard(['relay-a']);
  const pool = new UpstreamPool(config.upstreams, config.routing, config.healthCheck, silent);
  const decider = new QuotaDecider(valkey.store, policy, board, config.quotas, {
    now: clock.now,
    writeBudgets: new Map([['relay-a', config.upstreams[0]!.writeBudget!]]),
  });
  const metrics = metricsFor(board, pool);
  const ctx = {
    config,
    store: valkey.store,
    policy,
    decider,
    pool,
    metrics,
    log: silent,
    board,
  };
  const admission = new Admission(ctx);
  const post = (ip: string) =>
    admission.http({ ip, method: 'POST', url: '/events', contentLength: 100 });
  return { admission, board, valkey, metrics, post };
}

async function nodeBudgetCount(metrics: GatewayMetrics, outcome: string): Promise<number> {
  const values = (await metrics.nodeBudgetDecisions.counter.get()).values;
  return values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
}

describe('admission: the client cap first, then the node budget', { timeout: 10_000 }, () => {
  it('a heavy writer is refused by its own cap without drawing on the node budget', async () => {
    const { board, valkey, post } = admissionSetup();
    board.setOverride('relay-a', 0.5);
    const verdicts = [];
    for (let i = 0; i < 10; i++) verdicts.push(await post('198.51.100.1'));
    assert.deepEqual(
      verdicts.map((v) => v.action),
      ['forward', 'forward', ...Array<string>(8).fill('answer')],
    );
    const refused = verdicts[9]!;
    assert.equal(refused.action, 'answer');
    if (refused.action !== 'answer') return;
    assert.equal(refused.problem.status, 429);
    assert.deepEqual(refused.problem['violated-policies'], ['writes']);
    assert.match(refused.problem.detail, /^relay under memory pressure: write quota of 2 per 60 s/);
    assert.equal(valkey.consumed(NODE_KEY), 2, 'only the two writes its cap admitted');
  });

  it('a wave of light clients is held to budget x m; refusals name the node budget', async () => {
    const { board, valkey, metrics, post } = admissionSetup();
    const limitedBefore = await nodeBudgetCount(metrics, 'limited');
    for (let i = 0; i < 30; i++) {
      assert.equal((await post(`203.0.113.${i}`)).action, 'forward', 'm = 1: all pass');
    }
    assert.equal(valkey.consumed(NODE_KEY), 0, 'nothing charged at m = 1');
    board.setOverride('relay-a', 0.5);
    const verdicts = [];
    for (let i = 0; i < 30; i++) verdicts.push(await post(`203.0.113.${i}`));
    const admitted = verdicts.filter((v) => v.action === 'forward');
    assert.equal(admitted.length, 10, 'budget 20 x 0.5');
    const refused = verdicts.find((v) => v.action === 'answer')!;
    assert.equal(refused.action, 'answer');
    if (refused.action !== 'answer') return;
    assert.equal(refused.problem.status, 429);
    assert.deepEqual(refused.problem['violated-policies'], [NODE_BUDGET_POLICY]);
    assert.match(
      refused.problem.detail,
      /^relay under memory pressure: the relay node's write budget of 10 per 60 s/,
    );
    assert.equal(
      refused.headers['ratelimit-policy'],
      `"writes";q=2;w=60, "${NODE_BUDGET_POLICY}";q=10;w=60`,
    );
    assert.match(refused.headers.ratelimit!, /^"writes";r=0;t=60, "node-budget";r=0;t=60$/);
    assert.equal(refused.headers['retry-after'], '60');
    assert.equal((await nodeBudgetCount(metrics, 'limited')) - limitedBefore, 20);
  });

  it('over Nostr: OK false, rate-limited: relay under memory pressure, retry in Ns', async () => {
    const { admission, board } = admissionSetup();
    board.setOverride('relay-a', 0.5);
    const author = freshAuthor();
    const answers = [];
    for (let i = 0; i < 12; i++) {
      const conn = {
        ip: `203.0.113.${100 + i}`,
        nodeId: 'relay-a',
        session: admission.newSession(),
      };
      const event = author.event(i);
      answers.push(
        await admission.frame(conn, Buffer.from(JSON.stringify(['EVENT', event])), false),
      );
    }
    assert.equal(answers.filter((a) => a.forward).length, 10);
    const refused = answers.find((a) => !a.forward)!;
    assert.equal(refused.reply![2], false);
    assert.match(
      String(refused.reply![3]),
      /^rate-limited: relay under memory pressure, retry in \d+s$/,
    );
  });

  it('shadow mode: a refusal by the node budget is admitted and counted as shadow_limited', async () => {
    const { board, metrics, post } = admissionSetup('shadow');
    const before = await nodeBudgetCount(metrics, 'shadow_limited');
    board.setOverride('relay-a', 0.5);
    for (let i = 0; i < 15; i++) {
      assert.equal((await post(`192.0.2.${i}`)).action, 'forward');
    }
    assert.equal((await nodeBudgetCount(metrics, 'shadow_limited')) - before, 5);
  });
});
