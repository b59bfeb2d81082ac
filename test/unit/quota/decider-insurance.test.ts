/**
 * The insurance limiter (Valkey down) in-process, with a store that always fails: one
 * counter per (class, tier, window) whatever the multiplier, kept across reloads.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayConfigSchema } from '../../../src/config/schema.js';
import { MultiplierBoard } from '../../../src/pressure/follower/board.js';
import { QuotaDecider } from '../../../src/quota/decider.js';
import { Policy, makeIdentity } from '../../../src/quota/policy.js';
import { StoreError } from '../../../src/store/index.js';
import type { Store } from '../../../src/store/index.js';

const down = () => Promise.reject(new StoreError('valkey is down'));
/** Every call fails: the limiter's, and the lease scripts' (leases are on by default). */
const failingStore = {
  limiter: () => ({ consume: down, peek: down }),
  leases: { take: down, giveBack: down },
} as unknown as Store;

function quotas(points: number) {
  return GatewayConfigSchema.parse({
    admin: { token: 'a-test-token-of-some-length' },
    upstreams: [{ id: 'relay-a', url: 'http://127.0.0.1:1' }],
    quotas: { tiers: { default: { write: { points, windowSec: 60 } } } },
  }).quotas;
}

function setup(points: number) {
  const settings = quotas(points);
  const policy = new Policy(settings);
  const board = new MultiplierBoard(['relay-a']);
  const decider = new QuotaDecider(failingStore, policy, board, settings);
  const identity = makeIdentity('ip', '192.0.2.1', 'default', 'salt');
  const write = () =>
    decider.decide({ identity, ip: '192.0.2.1', cls: 'write', cost: 1, nodeId: 'relay-a' });
  return { decider, policy, board, write };
}

async function admittedOf(write: () => unknown, n: number): Promise<number> {
  let admitted = 0;
  for (let i = 0; i < n; i++) {
    const d = (await write()) as { admitted: boolean; outcome: string };
    assert.equal(d.outcome, 'insured');
    if (d.admitted) admitted++;
  }
  return admitted;
}

describe('insurance limiter', { timeout: 10_000 }, () => {
  it('counts one share whatever the multiplier: a change neither resets nor splits it', async () => {
    const { board, write } = setup(10);
    assert.equal(await admittedOf(write, 6), 6);
    board.setOverride('relay-a', 0.5); // the share falls to 5, and 6 are already spent
    assert.equal(await admittedOf(write, 3), 0, 'a lower limit applies to what was consumed');
    board.setOverride('relay-a', 1);
    // Back to 10: the refused writes above were counted too (as Valkey counts them).
    assert.equal(await admittedOf(write, 5), 1);
  });

  it('keeps its counts across a reload', async () => {
    const { decider, policy, write } = setup(10);
    assert.equal(await admittedOf(write, 10), 10);
    const same = quotas(10);
    policy.reload(same);
    decider.reload(same);
    assert.equal(await admittedOf(write, 3), 0, 'a reload does not hand out a fresh share');
  });

  it('skips Valkey for retryStoreAfterMs after a failure, then asks it again', async () => {
    let t = 0;
    let calls = 0;
    let isDown = true;
    // Calls that reach Valkey: plain consumes, and lease takes (leases are on by default).
    const store = {
      limiter: () => ({
        consume: () => {
          calls++;
          return isDown
            ? Promise.reject(new StoreError('valkey is down'))
            : Promise.resolve({
                allowed: true,
                limit: 10,
                consumed: 1,
                remaining: 9,
                msBeforeNext: 500,
                fromMemory: false,
              });
        },
      }),
      leases: {
        take: () => {
          calls++;
          return isDown
            ? Promise.reject(new StoreError('valkey is down'))
            : Promise.resolve({ granted: 1, consumed: 1, msLeft: 500 });
        },
        giveBack: () => Promise.resolve(0),
      },
    } as unknown as Store;
    const settings = quotas(10);
    const decider = new QuotaDecider(
      store,
      new Policy(settings),
      new MultiplierBoard(['relay-a']),
      settings,
      {
        now: () => t,
      },
    );
    const identity = makeIdentity('ip', '192.0.2.9', 'default', 'salt');
    const write = () =>
      decider.decide({ identity, ip: '192.0.2.9', cls: 'write', cost: 1, nodeId: 'relay-a' });
    assert.equal((await write())!.outcome, 'insured');
    assert.equal(calls, 1);
    assert.equal(decider.storeDown, true);
    // Within the window: no caller waits on a Valkey that just failed.
    t += settings.retryStoreAfterMs - 1;
    assert.equal((await write())!.outcome, 'insured');
    assert.equal(calls, 1, 'Valkey skipped');
    // Past it, Valkey (back by now) decides again.
    isDown = false;
    t += 1;
    assert.equal(decider.storeDown, false);
    assert.equal((await write())!.outcome, 'allowed');
    assert.equal(calls, 2);
  });
});
