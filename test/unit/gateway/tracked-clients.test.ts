/**
 * Memory per client is bounded: every structure keyed by a client (identity hashes, in-memory
 * blocks, insurance counters, frame rates, connection slots) holds at most
 * limits.maxTrackedClients, forgetting the least recently seen, and forgetting never admits a
 * client beyond its limit while Valkey answers. In process, with injected clocks and a fake
 * Valkey for the decider (the real one: test/integration/tracked-clients.test.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_MAX_TRACKED_CLIENTS, GatewayConfigSchema } from '../../../src/config/schema.js';
import { AddressSlots } from '../../../src/gateway/address-slots.js';
import { senderIdentity, writeSenders } from '../../../src/write/pipeline.js';
import { MultiplierBoard } from '../../../src/pressure/follower/board.js';
import { QuotaDecider } from '../../../src/quota/decider.js';
import { IdentityKeys, boundIdentityKeys, identityKeys } from '../../../src/quota/identity-keys.js';
import { Policy, makeIdentity } from '../../../src/quota/policy.js';
import { InMemoryBlocks } from '../../../src/store/blocks.js';
import { clientKey } from '../../../src/store/index.js';
import type { Store } from '../../../src/store/index.js';
import { WindowCounters } from '../../../src/util/window-counters.js';
import { admissionUnderTest } from '../../helpers/fake-admission-context.js';
import { FakeValkey, manualClock } from '../../helpers/fake-valkey.js';

const key = (i: number) => clientKey(`ip:192.0.2.${i}`, 'test-salt');

describe('WindowCounters (insurance and frame rate)', { timeout: 10_000 }, () => {
  it('holds at most max keys and forgets the least recently used', () => {
    const counters = new WindowCounters(3);
    for (const k of ['a', 'b', 'c']) counters.consume(k, 1, 60_000);
    counters.consume('a', 1, 60_000); // a is now the most recent: b goes first
    counters.consume('d', 1, 60_000);
    assert.equal(counters.size, 3);
    assert.equal(counters.consume('a', 1, 60_000).consumed, 3, 'a kept its count');
    assert.equal(counters.consume('b', 1, 60_000).consumed, 1, 'b was forgotten');
  });

  it('starts a fresh window once the last one ends', () => {
    const clock = manualClock();
    const counters = new WindowCounters(10, clock.now);
    counters.consume('a', 5, 1000);
    clock.advance(400);
    assert.deepEqual(counters.consume('a', 1, 1000), { consumed: 6, msBeforeNext: 600 });
    clock.advance(600);
    assert.deepEqual(counters.consume('a', 1, 1000), { consumed: 1, msBeforeNext: 1000 });
  });
});

describe('InMemoryBlocks', { timeout: 10_000 }, () => {
  it('holds at most max clients, the most recently refused', () => {
    const blocks = new InMemoryBlocks(2);
    blocks.block(key(1), 1, 60_000);
    blocks.block(key(2), 1, 60_000);
    assert.ok(blocks.msBlocked(key(1), 1) > 0); // 1 is refused again: now the most recent
    blocks.block(key(3), 1, 60_000);
    assert.equal(blocks.size, 2);
    assert.ok(blocks.msBlocked(key(1), 1) > 0);
    assert.equal(blocks.msBlocked(key(2), 1), 0, 'the least recently refused was forgotten');
  });

  it('blocks only limits the recorded count reaches, until the window ends', () => {
    const clock = manualClock();
    const blocks = new InMemoryBlocks(10, clock.now);
    blocks.block(key(1), 5, 1000);
    assert.equal(blocks.msBlocked(key(1), 5), 1000);
    assert.equal(blocks.msBlocked(key(1), 10), 0, 'a higher limit (multiplier) is not reached');
    blocks.block(key(1), 3, 1000); // an older answer arriving late does not lower the count
    assert.ok(blocks.msBlocked(key(1), 5) > 0);
    clock.advance(1000);
    assert.equal(blocks.msBlocked(key(1), 5), 0, 'the window ended');
  });
});

describe('IdentityKeys', { timeout: 10_000 }, () => {
  it('returns the salted hash and holds at most max identities', () => {
    const keys = new IdentityKeys(2);
    assert.equal(keys.keyOf('ip:1.1.1.1', 's1'), clientKey('ip:1.1.1.1', 's1'));
    keys.keyOf('ip:2.2.2.2', 's1');
    keys.keyOf('ip:3.3.3.3', 's1');
    assert.equal(keys.size, 2);
    assert.equal(keys.keyOf('ip:1.1.1.1', 's1'), clientKey('ip:1.1.1.1', 's1'));
  });

  it('never returns a key made with another salt', () => {
    const keys = new IdentityKeys(10);
    keys.keyOf('ip:1.1.1.1', 'old-salt');
    keys.keyOf('ip:2.2.2.2', 'old-salt');
    assert.equal(keys.keyOf('ip:1.1.1.1', 'new-salt'), clientKey('ip:1.1.1.1', 'new-salt'));
    assert.equal(keys.size, 1, 'emptied when the salt changed');
  });

  it('is what makeIdentity hashes through, bounded by boundIdentityKeys', () => {
    boundIdentityKeys(5);
    try {
      for (let i = 0; i < 20; i++) {
        const identity = makeIdentity('ip', `198.51.100.${i}`, 'default', 'test-salt');
        assert.equal(identity.key, clientKey(`ip:198.51.100.${i}`, 'test-salt'));
      }
      assert.equal(identityKeys().size, 5);
    } finally {
      boundIdentityKeys(DEFAULT_MAX_TRACKED_CLIENTS);
    }
  });
});

describe('AddressSlots', { timeout: 10_000 }, () => {
  it('holds an entry only while an address holds a connection', () => {
    const slots = new AddressSlots(2);
    const releases = Array.from({ length: 1000 }, (_, i) =>
      slots.acquire(`10.0.${i >> 8}.${i & 255}`)!,
    );
    assert.equal(slots.addresses, 1000);
    for (const release of releases) release();
    assert.equal(slots.addresses, 0);
  });
});

function settings(points: number, leases: boolean) {
  return GatewayConfigSchema.parse({
    admin: { token: 'a-test-token-of-some-length' },
    upstreams: [{ id: 'relay-a', url: 'http://127.0.0.1:1' }],
    quotas: {
      tiers: { default: { write: { points, windowSec: 60 } } },
      lease: { enabled: leases },
    },
  }).quotas;
}

function deciderOn(
  store: Store,
  points: number,
  maxTrackedClients: number,
  now = Date.now,
  leases = true,
) {
  const quotas = settings(points, leases);
  const board = new MultiplierBoard(['relay-a']);
  const decider = new QuotaDecider(store, new Policy(quotas), board, quotas, {
    now,
    maxTrackedClients,
  });
  const write = (i: number) =>
    decider.decide({
      identity: makeIdentity('ip', `192.0.2.${i}`, 'default', 'test-salt'),
      ip: `192.0.2.${i}`,
      cls: 'write',
      cost: 1,
      nodeId: 'relay-a',
    });
  return { decider, board, write };
}

describe('QuotaDecider memory per client', { timeout: 10_000 }, () => {
  it('blocks at most maxTrackedClients; an evicted client is judged by Valkey again', async () => {
    const clock = manualClock();
    const valkey = new FakeValkey(clock.now);
    // Leases off: the consume that takes the last point blocks at once (with leases, only
    // a refused take does, as points held by other gateways may come back).
    const { decider, write } = deciderOn(valkey.store, 1, 3, clock.now, false);
    assert.equal((await write(0))!.admitted, true);
    const blocked = (await write(0))!;
    assert.deepEqual([blocked.admitted, blocked.fromMemory], [false, true]);
    for (let i = 1; i <= 3; i++) assert.equal((await write(i))!.admitted, true);
    assert.equal(decider.trackedClients()['in-memory-blocks'], 3);

    const callsBefore = valkey.calls;
    const evicted = (await write(0))!;
    assert.deepEqual(
      [evicted.admitted, evicted.fromMemory, valkey.calls - callsBefore],
      [false, false, 1],
      'client 0 was forgotten by the block: Valkey refused it',
    );
    const again = (await write(0))!;
    assert.deepEqual([again.admitted, again.fromMemory], [false, true], 'blocked again');
  });

  it('shares one block between the limits of a counter: a higher limit asks Valkey', async () => {
    const clock = manualClock();
    const valkey = new FakeValkey(clock.now);
    // Leases off: the counts are Valkey's point by point (a lease holds points ahead).
    const { board, write } = deciderOn(valkey.store, 10, 100, clock.now, false);
    board.setOverride('relay-a', 0.5); // 5 points
    for (let i = 0; i < 5; i++) assert.equal((await write(0))!.admitted, true);
    assert.equal((await write(0))!.fromMemory, true);
    board.setOverride('relay-a', 1); // 10 points: 6 consumed so far (the refusal counted once)
    const raised = (await write(0))!;
    assert.deepEqual([raised.admitted, raised.fromMemory], [true, false]);
  });

  it('keeps insurance counters for at most maxTrackedClients, the recent ones', async () => {
    const clock = manualClock();
    const valkey = new FakeValkey(clock.now);
    valkey.failing = true;
    const { decider, write } = deciderOn(valkey.store, 5, 3, clock.now);
    let hotAdmitted = 0;
    for (let i = 1; i <= 20; i++) {
      const hot = (await write(0))!;
      assert.equal(hot.outcome, 'insured');
      if (hot.admitted) hotAdmitted++;
      await write(i); // a new client each time
    }
    assert.equal(decider.trackedClients().insurance, 3);
    assert.equal(hotAdmitted, 5, 'a client that keeps writing keeps its count');
  });
});

describe('frame rate per address', { timeout: 10_000 }, () => {
  it('tracks at most maxTrackedClients addresses', async () => {
    const { admission } = admissionUnderTest(
      { limits: { framesPerSecPerAddress: 2, maxTrackedClients: 2 } },
      [],
    );
    const conn = (ip: string) => ({ ip, nodeId: 'relay-a', session: admission.newSession() });
    const close = Buffer.from('["CLOSE","s"]');
    const a = conn('192.0.2.1');
    assert.equal((await admission.frame(a, close, false)).forward, true);
    assert.equal((await admission.frame(a, close, false)).forward, true);
    assert.equal((await admission.frame(a, close, false)).forward, false, 'over 2 a second');
    // Two other addresses push a out of the bound: it is counted afresh.
    await admission.frame(conn('192.0.2.2'), close, false);
    await admission.frame(conn('192.0.2.3'), close, false);
    assert.equal((await admission.frame(a, close, false)).forward, true);
  });
});

describe('range identities (quotas.ranges)', { timeout: 10_000 }, () => {
  it('holds at most the configured maxTrackedClients clients, and the metric says so', async () => {
    const { ctx } = admissionUnderTest(
      { quotas: { ranges: { enabled: true } }, limits: { maxTrackedClients: 3 } },
      [],
    );
    const { config } = ctx;
    for (let i = 0; i < 10; i++) {
      const policy = ctx.policy.pin(); // as each write pins it
      const sender = senderIdentity(config, policy, { ip: `2001:db8:${i}::/64` });
      const charged = writeSenders(config, policy, [sender]);
      assert.deepEqual(
        charged.map((id) => id.tier),
        ['default', 'range:ipv6/56', 'range:ipv6/48'],
      );
    }
    assert.equal(ctx.policy.rangeIdentitiesHeld, 3, 'the configured bound, not the default');
    const metric = await ctx.metrics.registry.getSingleMetric('sluice_tracked_clients')!.get();
    const held = metric.values.find((v) => v.labels.structure === 'range-identities');
    assert.equal(held?.value, 3);
    // A reload keeps the bound (limits are not reloaded with the quotas).
    ctx.policy.reload(config.quotas);
    for (let i = 0; i < 10; i++) ctx.policy.rangeIdentities(`2001:db8:${i}::/64`, 's');
    assert.equal(ctx.policy.rangeIdentitiesHeld, 3);
  });
});
