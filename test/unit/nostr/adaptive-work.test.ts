/** The difficulty asked of non-members as a node's multiplier falls (nostr.pow.adaptive). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { requiredDifficulty } from '../../../src/nostr/adaptive-work.js';

const ON = { enabled: true, bitsPerHalving: 4, maxDifficulty: 24 };

describe('requiredDifficulty', { timeout: 10_000 }, () => {
  it('asks nothing more at m = 1, or when off', () => {
    assert.equal(requiredDifficulty(1, 0, ON), 0);
    assert.equal(requiredDifficulty(1, 5, ON), 5);
    assert.equal(requiredDifficulty(0.1, 5, { ...ON, enabled: false }), 5);
    assert.equal(requiredDifficulty(0.1, 5, undefined), 5);
  });

  it('adds bitsPerHalving for each halving, rounded up, capped, the cap at m = 0', () => {
    assert.equal(requiredDifficulty(0.5, 0, ON), 4);
    assert.equal(requiredDifficulty(0.25, 0, ON), 8);
    assert.equal(requiredDifficulty(0.25, 3, ON), 11);
    assert.equal(requiredDifficulty(0.9, 0, ON), 1);
    assert.equal(requiredDifficulty(0.01, 0, ON), 24);
    assert.equal(requiredDifficulty(0, 0, ON), 24);
    // A cap below the configured minimum never lowers it.
    assert.equal(requiredDifficulty(0, 30, ON), 30);
  });

  it('never asks less as m falls, and never less than minDifficulty (generated)', () => {
    let seed = 7;
    const random = () => (seed = (seed * 48271) % 2147483647) / 2147483647;
    for (let i = 0; i < 2000; i++) {
      const a = random();
      const b = random();
      const min = Math.floor(random() * 10);
      const settings = { enabled: true, bitsPerHalving: 0.5 + random() * 8, maxDifficulty: 30 };
      const [lo, hi] = a < b ? [a, b] : [b, a];
      const atLo = requiredDifficulty(lo, min, settings);
      const atHi = requiredDifficulty(hi, min, settings);
      assert.ok(atLo >= atHi, `m ${lo} asks ${atLo} < m ${hi} asks ${atHi}`);
      assert.ok(atHi >= min && atLo <= Math.max(min, 30));
    }
  });
});
