/** The load generator's percentiles (the loads themselves: test/integration/peer-and-ws-load.test.ts). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { percentiles } from '../../../src/bench/ws-load.js';

describe('percentiles', { timeout: 120_000 }, () => {
  it('is null for no values', () => {
    assert.equal(percentiles([]), null);
  });

  it('uses the nearest rank on 1..100', () => {
    const values = Array.from({ length: 100 }, (_, i) => 100 - i); // any order
    assert.deepEqual(percentiles(values), { p50: 50, p90: 90, p99: 99, max: 100, mean: 50.5 });
  });

  it('handles one value and small lists', () => {
    assert.deepEqual(percentiles([7]), { p50: 7, p90: 7, p99: 7, max: 7, mean: 7 });
    assert.deepEqual(percentiles([3, 1, 2, 10]), {
      p50: 2,
      p90: 10,
      p99: 10,
      max: 10,
      mean: 4,
    });
    assert.deepEqual(percentiles([0.5, 0.25, 0.125]), {
      p50: 0.25,
      p90: 0.5,
      p99: 0.5,
      max: 0.5,
      mean: 0.875 / 3,
    });
  });
});
