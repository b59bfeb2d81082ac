/**
 * The consume contract's pieces in process (src/quota/consumers.ts), each on the fake store
 * and an injected clock: the plain limiter, and each wrapper with a case that fails without
 * it; then the decider over the two-method multiplier interface.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayConfigSchema } from '../../../src/config/schema.js';
import { InMemoryBlocks } from '../../../src/store/blocks.js';
import { StoreError, clientKey } from '../../../src/store/index.js';
import type { Consumer, Judged, Verdict } from '../../../src/quota/consume.js';
import {
  BlockedConsumer,
  InsuredConsumer,
  LeasedConsumer,
  LimiterConsumer,
  StoreBreaker,
  guarded,
} from '../../../src/quota/consumers.js';
import { QuotaDecider } from '../../../src/quota/decider.js';
import { LeaseBook } from '../../../src/quota/leases.js';
import type { NodeMultipliers } from '../../../src/quota/multipliers.js';
import { Policy, makeIdentity } from '../../../src/quota/policy.js';
import { WindowCounters } from '../../../src/util/window-counters.js';
import { FakeValkey, manualClock } from '../../helpers/fake-valkey.js';

const BOUND = { timeout: 10_000 };
const PREFIX = 'test:write:default:60';
const WINDOW_MS = 60_000;
const KEY = clientKey('192.0.2.1');
const NODE = 'relay-a';

/** The fake store, its clock, and the plain limiter on PREFIX at `points` per minute. */
function setUp(points: number) {
  const clock = manualClock();
  const valkey = new FakeValkey(clock.now);
  const plainAt = (p: number): Consumer =>
    new LimiterConsumer(
      () => valkey.store.limiter({ keyPrefix: PREFIX, points: p, duration: WINDOW_MS / 1000 }),
      p,
    );
  return { clock, valkey, plain: plainAt(points), plainAt };
}

function judged(v: Verdict): Judged {
  assert.equal(v.failed, false, 'a counter judged it');
  return v;
}

async function consumeN(c: Consumer, n: number, cost = 1): Promise<Verdict[]> {
  const out: Verdict[] = [];
  for (let i = 0; i < n; i++) out.push(await c.consume(KEY, cost, NODE));
  return out;
}

const admittedOf = (vs: Verdict[]) => vs.map((v) => judged(v).admitted);

describe('the plain limiter', BOUND, () => {
  it('admits its points, then refuses with the numbers headers need, each a round trip', async () => {
    const { valkey, plain } = setUp(3);
    const vs = (await consumeN(plain, 4)).map(judged);
    assert.deepEqual(admittedOf(vs), [true, true, true, false]);
    assert.deepEqual(
      vs.map((v) => [v.remaining, v.consumed, v.exhausted]),
      [
        [2, 1, false],
        [1, 2, false],
        [0, 3, true],
        [0, 4, true],
      ],
    );
    assert.ok(vs.every((v) => v.by === 'store' && v.roundTrip && v.limit === 3));
    assert.equal(vs[3]!.msBeforeNext, WINDOW_MS);
    assert.equal(valkey.calls, 4);
  });

  it('a store failure is a failed verdict, never a refusal', async () => {
    const { valkey, plain } = setUp(3);
    valkey.failing = true;
    const v = await plain.consume(KEY, 1, NODE);
    assert.equal(v.failed, true);
    assert.ok(v.failed && v.error instanceof StoreError);
  });
});

describe('the lease book around it', BOUND, () => {
  function leased(points: number) {
    const s = setUp(points);
    const book = new LeaseBook(s.valkey.leases, {
      holders: 1,
      idleMs: WINDOW_MS,
      maxKeys: 100,
      now: s.clock.now,
    });
    const terms = { keyPrefix: PREFIX, limit: points, windowMs: WINDOW_MS, base: points };
    return { ...s, book, consumer: new LeasedConsumer(s.plain, book, terms) };
  }

  it('spends points leased from Valkey: one take serves several writes', async () => {
    const { valkey, book, consumer } = leased(100);
    const vs = await consumeN(consumer, 5);
    assert.deepEqual(admittedOf(vs), [true, true, true, true, true]);
    assert.equal(valkey.calls, 0, 'the plain limiter was not asked');
    assert.ok(valkey.takes < 5, `${valkey.takes} takes for 5 writes`);
    assert.ok(judged(vs.at(-1)!).roundTrip === false, 'the last write was spent from memory');
    assert.ok(valkey.consumed(`${PREFIX}:${KEY}`) >= 5, 'leased points count in Valkey');
    await book.close();
  });

  it('a write of nothing asks the plain limiter: there is nothing to lease', async () => {
    const { valkey, book, consumer } = leased(100);
    assert.equal(judged(await consumer.consume(KEY, 0, NODE)).admitted, true);
    assert.deepEqual([valkey.calls, valkey.takes], [1, 0]);
    await book.close();
  });

  it('a failed take is a failed verdict', async () => {
    const { valkey, book, consumer } = leased(100);
    valkey.failing = true;
    assert.equal((await consumer.consume(KEY, 1, NODE)).failed, true);
    await book.close();
  });

  it('under a block, a key is blocked on a refusal, not on a write that fills the counter', async () => {
    const { valkey, book, consumer } = leased(2);
    const blocked = new BlockedConsumer(consumer, new InMemoryBlocks(100), 2);
    const vs = (await consumeN(blocked, 2)).map(judged);
    assert.deepEqual(admittedOf(vs), [true, true]);
    assert.equal(vs[1]!.consumed, 2, 'the counter is full');
    assert.equal(vs[1]!.exhausted, false, 'only a refusal shows nothing is held anywhere');
    const takes = valkey.takes;
    const refused = judged(await blocked.consume(KEY, 1, NODE));
    assert.deepEqual([refused.admitted, refused.by, valkey.takes], [false, 'store', takes + 1]);
    const again = judged(await blocked.consume(KEY, 1, NODE));
    assert.deepEqual([again.admitted, again.by, valkey.takes], [false, 'memory', takes + 1]);
    await book.close();
  });
});

describe('the in-memory block', BOUND, () => {
  it('refuses a key that is out of points from memory until its window ends', async () => {
    const { clock, valkey, plain } = setUp(2);
    const blocked = new BlockedConsumer(plain, new InMemoryBlocks(100, clock.now), 2);
    assert.deepEqual(admittedOf(await consumeN(blocked, 2)), [true, true]);
    clock.advance(10_000);
    const v = judged(await blocked.consume(KEY, 1, NODE));
    assert.deepEqual([v.admitted, v.by, v.roundTrip, v.remaining], [false, 'memory', false, 0]);
    assert.equal(v.msBeforeNext, WINDOW_MS - 10_000, 'until the window ends');
    assert.equal(valkey.calls, 2, 'no round trip');
    clock.advance(WINDOW_MS - 10_000);
    const next = judged(await blocked.consume(KEY, 1, NODE));
    assert.deepEqual([next.admitted, next.by, valkey.calls], [true, 'store', 3]);
  });

  it('one set of blocks serves every limit of the counter: a higher one asks Valkey', async () => {
    const { valkey, plainAt } = setUp(2);
    const blocks = new InMemoryBlocks(100);
    assert.deepEqual(admittedOf(await consumeN(new BlockedConsumer(plainAt(2), blocks, 2), 2)), [
      true,
      true,
    ]);
    const lower = judged(await new BlockedConsumer(plainAt(1), blocks, 1).consume(KEY, 1, NODE));
    assert.deepEqual([lower.admitted, lower.by, valkey.calls], [false, 'memory', 2]);
    const higher = judged(await new BlockedConsumer(plainAt(4), blocks, 4).consume(KEY, 1, NODE));
    assert.deepEqual([higher.admitted, higher.by, valkey.calls], [true, 'store', 3]);
  });

  it('a failure blocks nothing', async () => {
    const { valkey, plain } = setUp(2);
    const blocks = new InMemoryBlocks(100);
    valkey.failing = true;
    await consumeN(new BlockedConsumer(plain, blocks, 2), 3);
    assert.equal(blocks.size, 0);
  });
});

describe('the store breaker', BOUND, () => {
  it('skips Valkey for retryAfterMs after a failure, then asks it again; times each call', async () => {
    const { clock, valkey, plain } = setUp(5);
    const calls: boolean[] = [];
    const observer = { storeCall: (_s: number, ok: boolean) => calls.push(ok) };
    const breaker = new StoreBreaker(clock.now, () => 500, observer);
    const consumer = breaker.wrap(plain);
    valkey.failing = true;
    assert.equal((await consumer.consume(KEY, 1, NODE)).failed, true);
    assert.deepEqual([valkey.calls, breaker.isOpen, calls], [1, true, [false]]);
    clock.advance(499);
    assert.equal((await consumer.consume(KEY, 1, NODE)).failed, true);
    assert.equal(valkey.calls, 1, 'skipped: no request waits on a Valkey that just failed');
    valkey.failing = false;
    clock.advance(1);
    assert.equal(breaker.isOpen, false);
    assert.equal(judged(await consumer.consume(KEY, 1, NODE)).admitted, true);
    assert.deepEqual([valkey.calls, calls], [2, [false, true]]);
  });

  it('one breaker for every counter it wraps: a failure of one skips the others', async () => {
    const { clock, valkey, plain, plainAt } = setUp(5);
    const breaker = new StoreBreaker(clock.now, () => 500);
    valkey.failing = true;
    await breaker.wrap(plain).consume(KEY, 1, NODE);
    valkey.failing = false;
    assert.equal((await breaker.wrap(plainAt(9)).consume(KEY, 1, NODE)).failed, true);
    assert.equal(valkey.calls, 1);
  });
});

describe('the insured share', BOUND, () => {
  function insured(points: number, share: number) {
    const s = setUp(points);
    const counters = new WindowCounters<ReturnType<typeof clientKey>>(100, s.clock.now);
    const insurance = { counters: () => counters, share, windowMs: WINDOW_MS };
    return { ...s, counters, consumer: new InsuredConsumer(s.plain, insurance) };
  }

  it("judges against this gateway's share while Valkey fails", async () => {
    const { clock, valkey, consumer, plain } = insured(10, 5);
    valkey.failing = true;
    assert.equal((await plain.consume(KEY, 1, NODE)).failed, true, 'without it: a failure');
    const vs = (await consumeN(consumer, 7)).map(judged);
    assert.deepEqual(admittedOf(vs), [true, true, true, true, true, false, false]);
    assert.ok(vs.every((v) => v.by === 'insurance' && v.limit === 5 && !v.roundTrip));
    assert.deepEqual(
      vs.map((v) => v.remaining),
      [4, 3, 2, 1, 0, 0, 0],
    );
    clock.advance(WINDOW_MS);
    assert.equal(judged(await consumer.consume(KEY, 1, NODE)).admitted, true, 'a new window');
  });

  it("passes Valkey's verdicts through and counts nothing", async () => {
    const { counters, consumer } = insured(10, 5);
    assert.equal(judged(await consumer.consume(KEY, 1, NODE)).by, 'store');
    assert.equal(counters.size, 0);
  });
});

describe('guarded: insurance(breaker(block(source)))', BOUND, () => {
  it('a blocked key costs no store call and no timing; a failure trips the breaker and is insured', async () => {
    const { clock, valkey, plain } = setUp(1);
    const calls: boolean[] = [];
    const breaker = new StoreBreaker(clock.now, () => 500, {
      storeCall: (_s, ok) => calls.push(ok),
    });
    const counters = new WindowCounters<ReturnType<typeof clientKey>>(100, clock.now);
    const consumer = guarded(plain, 1, {
      blocks: new InMemoryBlocks(100, clock.now),
      breaker,
      insurance: { counters: () => counters, share: 1, windowMs: WINDOW_MS },
    });
    const vs = (await consumeN(consumer, 2)).map(judged);
    assert.deepEqual(
      vs.map((v) => [v.admitted, v.by]),
      [
        [true, 'store'],
        [false, 'memory'],
      ],
      'the counter is full after the first: the block answers the second',
    );
    assert.deepEqual([valkey.calls, calls], [1, [true]]);
    valkey.failing = true;
    const other = clientKey('192.0.2.2');
    const v = judged(await consumer.consume(other, 1, NODE));
    assert.deepEqual([v.by, v.admitted, breaker.isOpen], ['insurance', true, true]);
    assert.deepEqual(calls, [true, false]);
  });
});

/** The quota settings of a gateway whose default tier writes `points` a minute. */
function quotaSettings(points: number, quotas: Record<string, unknown> = {}) {
  return GatewayConfigSchema.parse({
    admin: { token: 'a-test-token-of-some-length' },
    upstreams: [{ id: NODE, url: 'http://127.0.0.1:1' }],
    quotas: { tiers: { default: { write: { points, windowSec: 60 } } }, ...quotas },
  }).quotas;
}

/** A decider on the fake store over a two-method NodeMultipliers whose value the test sets. */
function deciderOver(settings: ReturnType<typeof quotaSettings>, multiplier: number) {
  const clock = manualClock();
  const valkey = new FakeValkey(clock.now);
  const listeners: ((m: { nodeId: string; value: number }) => void)[] = [];
  let value = multiplier;
  const multipliers: NodeMultipliers = {
    get: () => ({ value }),
    onChange: (l) => void listeners.push(l),
  };
  const decider = new QuotaDecider(valkey.store, new Policy(settings), multipliers, settings, {
    now: clock.now,
  });
  /** The node's multiplier from now on, told to the listeners as the board tells them. */
  const setMultiplier = (m: number) => {
    value = m;
    for (const l of listeners) l({ nodeId: NODE, value: m });
  };
  return { valkey, decider, listeners, setMultiplier };
}

describe('the decider over NodeMultipliers', BOUND, () => {
  it('reads the multiplier through the two-method interface, not the board', async () => {
    const { decider, listeners, setMultiplier } = deciderOver(quotaSettings(10), 0.5);
    assert.equal(listeners.length, 1, 'the decider listens for changes (to clip leases)');
    const identity = makeIdentity('ip', '192.0.2.1', 'default', 'salt');
    const write = () =>
      decider.decide({ identity, ip: '192.0.2.1', cls: 'write', cost: 1, nodeId: NODE });
    const d = (await write())!;
    assert.deepEqual([d.outcome, d.limit, d.multiplier, d.remaining], ['allowed', 5, 0.5, 4]);
    setMultiplier(1);
    assert.equal((await write())!.limit, 10);
  });

  it('a failure becomes an error decision: open admits, closed refuses, never a 429', async () => {
    for (const [mode, admitted] of [
      ['open', true],
      ['closed', false],
    ] as const) {
      const settings = quotaSettings(10, { onStoreFailure: mode });
      const valkey = new FakeValkey(Date.now);
      valkey.failing = true;
      const multipliers: NodeMultipliers = { get: () => ({ value: 1 }), onChange: () => undefined };
      const decider = new QuotaDecider(valkey.store, new Policy(settings), multipliers, settings);
      const identity = makeIdentity('ip', '192.0.2.1', 'default', 'salt');
      const d = (await decider.decide({
        identity,
        ip: '192.0.2.1',
        cls: 'write',
        cost: 1,
        nodeId: NODE,
      }))!;
      assert.deepEqual([d.outcome, d.admitted, d.resetSec], ['error', admitted, 1], mode);
    }
  });
});

describe('refunds: points go back where they were counted, within their window', BOUND, () => {
  const receiptOf = (v: Verdict, now: number) => {
    const j = judged(v);
    assert.ok(j.counted, 'the consume counted its cost');
    return { into: j.counted, until: now + j.msBeforeNext };
  };

  it('the plain limiter: a refund lets the next write in', async () => {
    const { clock, valkey, plain } = setUp(2);
    const vs = await consumeN(plain, 2);
    assert.equal(judged(await plain.consume(KEY, 1, NODE)).admitted, false);
    // The refused consume counted too (as rate-limiter-flexible does): give both back.
    assert.equal(await plain.refund(KEY, 2, receiptOf(vs[1]!, clock.now())), true);
    assert.equal(valkey.consumed(`${PREFIX}:${KEY}`), 1);
    assert.equal(judged(await plain.consume(KEY, 1, NODE)).admitted, true);
    valkey.failing = true;
    assert.equal(await plain.refund(KEY, 1, receiptOf(vs[0]!, clock.now())), false);
  });

  it('the lease book: into the lease held (no round trip), else into Valkey', async () => {
    const { clock, valkey, plain } = setUp(100);
    const book = new LeaseBook(valkey.leases, {
      holders: 1,
      idleMs: WINDOW_MS,
      maxKeys: 100,
      now: clock.now,
    });
    const terms = { keyPrefix: PREFIX, limit: 100, windowMs: WINDOW_MS, base: 100 };
    const consumer = new LeasedConsumer(plain, book, terms);
    const [v] = await consumeN(consumer, 1);
    const held = book.snapshot(`${PREFIX}:${KEY}`)!.held;
    const inValkey = valkey.consumed(`${PREFIX}:${KEY}`);
    assert.equal(await consumer.refund(KEY, 1, receiptOf(v!, clock.now())), true);
    assert.equal(book.snapshot(`${PREFIX}:${KEY}`)!.held, held + 1, 'back in the lease');
    assert.deepEqual([valkey.calls, valkey.consumed(`${PREFIX}:${KEY}`)], [0, inValkey]);
    const [w] = await consumeN(consumer, 1);
    await book.close(); // hands the lease back: a refund now goes to the counter
    const before = valkey.consumed(`${PREFIX}:${KEY}`);
    assert.equal(await consumer.refund(KEY, 1, receiptOf(w!, clock.now())), true);
    assert.equal(valkey.consumed(`${PREFIX}:${KEY}`), before - 1);
  });

  it('the block: a refund below the limit lets the key ask Valkey again', async () => {
    const { clock, plain } = setUp(1);
    const blocked = new BlockedConsumer(plain, new InMemoryBlocks(100, clock.now), 1);
    const [v] = await consumeN(blocked, 1);
    const refused = judged(await blocked.consume(KEY, 1, NODE));
    assert.deepEqual([refused.admitted, refused.by], [false, 'memory'], 'the counter is full');
    assert.equal(await blocked.refund(KEY, 1, receiptOf(v!, clock.now())), true);
    const again = judged(await blocked.consume(KEY, 1, NODE));
    assert.deepEqual([again.admitted, again.by], [true, 'store']);
  });

  it('the breaker: skipped while open, without a call', async () => {
    const { clock, valkey, plain } = setUp(5);
    const breaker = new StoreBreaker(clock.now, () => 500);
    const consumer = breaker.wrap(plain);
    const [v] = await consumeN(consumer, 1);
    breaker.trip();
    const calls = valkey.calls;
    assert.equal(await consumer.refund(KEY, 1, receiptOf(v!, clock.now())), false);
    assert.equal(valkey.calls, calls);
  });

  it('the insured share: an insured charge goes back to the share, never to Valkey', async () => {
    const { clock, valkey, plain } = setUp(10);
    const counters = new WindowCounters<ReturnType<typeof clientKey>>(100, clock.now);
    const consumer = new InsuredConsumer(plain, {
      counters: () => counters,
      share: 5,
      windowMs: WINDOW_MS,
    });
    await consumeN(consumer, 1); // counted in Valkey
    valkey.failing = true;
    const [insured] = await consumeN(consumer, 1);
    assert.equal(counters.peek(KEY), 1);
    valkey.failing = false;
    assert.equal(await consumer.refund(KEY, 1, receiptOf(insured!, clock.now())), true);
    assert.deepEqual([counters.peek(KEY), valkey.consumed(`${PREFIX}:${KEY}`)], [0, 1]);
  });

  it('the decider: a refund after the window it was charged in ends is no gift to the next', async () => {
    const settings = quotaSettings(2);
    const clock = manualClock();
    const valkey = new FakeValkey(clock.now);
    const multipliers: NodeMultipliers = { get: () => ({ value: 1 }), onChange: () => undefined };
    const decider = new QuotaDecider(valkey.store, new Policy(settings), multipliers, settings, {
      now: clock.now,
    });
    const identity = makeIdentity('ip', '192.0.2.1', 'default', 'salt');
    const req = { identity, ip: '192.0.2.1', cls: 'write' as const, cost: 1, nodeId: NODE };
    const d = (await decider.decide(req))!;
    assert.equal(d.receipt?.into, 'store');
    assert.equal(await decider.refund(req, d.receipt), true, 'within the window');
    const e = (await decider.decide(req))!;
    clock.advance(WINDOW_MS);
    assert.equal(await decider.refund(req, e.receipt), false, 'after it');
    await decider.decide(req);
    await decider.decide(req);
    assert.equal((await decider.decide(req))!.admitted, false, 'the new window holds 2, no more');
  });
});

describe('knownOverLimit with leases: what the book knows, no round trip', BOUND, () => {
  function leasedDecider(points: number) {
    const settings = quotaSettings(points, { lease: { enabled: true } });
    const { valkey, decider, setMultiplier } = deciderOver(settings, 1);
    const identity = makeIdentity('ip', '192.0.2.1', 'default', 'salt');
    const req = { identity, ip: '192.0.2.1', cls: 'write' as const, cost: 1, nodeId: NODE };
    const known = () => decider.knownOverLimit({ identity, cls: 'write', nodeId: NODE });
    /** What Valkey counts for the key. */
    const counted = () => valkey.consumed(`${settings.keyPrefix}:write:default:60:${identity.key}`);
    return { valkey, decider, req, known, setMultiplier, counted };
  }

  it('a key whose last take filled the counter and that holds nothing here is known out; a refund ends it', async () => {
    const { valkey, decider, req, known, counted } = leasedDecider(3);
    assert.equal((await decider.decide(req))!.admitted, true);
    assert.equal((await decider.decide(req))!.admitted, true);
    assert.equal(known(), null, 'a point is left in Valkey');
    const last = (await decider.decide(req))!;
    assert.equal(last.admitted, true);
    assert.equal(counted(), 3);
    const takes = valkey.takes;
    const out = known();
    assert.deepEqual([out?.admitted, out?.fromMemory, valkey.takes], [false, true, takes]);
    assert.ok(out!.resetSec > 0);
    // The write was not done: its point goes back into the lease, and the key may write again.
    assert.equal(await decider.refund(req, last.receipt), true);
    assert.equal(known(), null, 'a point is held here again');
    assert.equal((await decider.decide(req))!.admitted, true);
    assert.equal(valkey.takes, takes, 'spent from the lease');
    assert.equal(known()?.admitted, false);
  });

  it('points handed back leave Valkey room: a key is not known out for the count it had', async () => {
    const { decider, req, known, setMultiplier, counted } = leasedDecider(10);
    assert.equal((await decider.decide(req))!.admitted, true);
    assert.equal((await decider.decide(req))!.admitted, true);
    assert.ok(counted() >= 5, `a lease beyond the writes (Valkey counts ${counted()})`);
    // Half the limit (5): the lease held goes back at once, and Valkey counts the 2 writes.
    setMultiplier(0.5);
    await new Promise((resolve) => setImmediate(resolve)); // the fake's hand-back resolves
    assert.equal(counted(), 2);
    assert.equal(known(), null, 'Valkey has 3 points left at the lower limit');
  });
});
