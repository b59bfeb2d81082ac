import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayConfigSchema } from '../../../src/config/schema.js';
import { committedTarget, discountedCost, workDone } from '../../../src/nostr/pow.js';

const zeros = (bits: number) => {
  // An id with exactly `bits` leading zero bits (bits < 256).
  const bin = '0'.repeat(bits) + '1' + '0'.repeat(255 - bits);
  return BigInt(`0b${bin}`).toString(16).padStart(64, '0');
};

describe('proof of work (pure)', { timeout: 10_000 }, () => {
  it('credits the leading zero bits of the id', () => {
    assert.equal(workDone(zeros(0), []), 0);
    assert.equal(workDone(zeros(13), []), 13);
    assert.equal(workDone(zeros(21), [['t', 'x']]), 21);
  });

  it('caps the credit at the target the nonce tag commits to', () => {
    assert.equal(
      workDone(zeros(20), [['nonce', '99', '8']]),
      8,
      'luck beyond the target is not work',
    );
    assert.equal(
      workDone(zeros(6), [['nonce', '99', '8']]),
      6,
      'a target not met credits what is there',
    );
    assert.equal(workDone(zeros(20), [['nonce', '99']]), 20, 'no target committed');
    assert.equal(committedTarget([['nonce', '1', 'x']]), undefined);
    assert.equal(committedTarget([['nonce', '1', '16']]), 16);
  });

  it('discounts per whole step of bits above the minimum, rounding up, never below 1', () => {
    const half = { perBits: 8, factor: 0.5 };
    assert.equal(discountedCost(20, 10, 10, half), 20, 'at the minimum: full price');
    assert.equal(discountedCost(20, 17, 10, half), 20, 'short of a whole step');
    assert.equal(discountedCost(20, 18, 10, half), 10);
    assert.equal(discountedCost(20, 26, 10, half), 5);
    assert.equal(discountedCost(5, 18, 10, half), 3, '2.5 rounds up');
    assert.equal(discountedCost(20, 256, 0, half), 1, 'never below 1');
    assert.equal(discountedCost(0, 256, 0, half), 0, 'a free kind stays free');
    assert.equal(discountedCost(20, 200, 0, undefined), 20, 'no discount configured');
  });
});

describe('proof of work configuration', { timeout: 10_000 }, () => {
  const base = {
    admin: { token: '0123456789abcdef-pow' },
    upstreams: [{ id: 'relay-a', url: 'http://127.0.0.1:7001' }],
  };
  it('defaults to no minimum, no discount and no adaptive work; names bad values', () => {
    assert.deepEqual(GatewayConfigSchema.parse(base).nostr.pow, {
      minDifficulty: 0,
      adaptive: { enabled: false, bitsPerHalving: 4, maxDifficulty: 28 },
    });
    const res = GatewayConfigSchema.safeParse({
      ...base,
      nostr: { pow: { minDifficulty: 300, discount: { perBits: 0, factor: 1 } } },
    });
    assert.equal(res.success, false);
    const paths = res.error.issues.map((i) => i.path.join('.'));
    assert.deepEqual(paths.sort(), [
      'nostr.pow.discount.factor',
      'nostr.pow.discount.perBits',
      'nostr.pow.minDifficulty',
    ]);
  });
});
