/**
 * `sluice bench spike` keeps its arm's series for the report: one 10 ms poll in ten, seconds
 * from the arm's start, memory over target, each gateway's multiplier.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { thinSeries } from '../../../src/bench/spike-bench.js';

describe('bench spike series', () => {
  it('keeps one poll per 100 ms, in seconds from the start, u = bytes / target', () => {
    const polls = Array.from({ length: 50 }, (_, i) => ({
      t: 1000 + i * 10,
      bytes: 50 + i,
      m: [(100 - i) / 100, (50 - i) / 50],
    }));
    const s = thinSeries(polls, 1000, 100);
    assert.deepEqual(s.t, [0, 0.1, 0.2, 0.3, 0.4]);
    assert.deepEqual(s.u, [0.5, 0.6, 0.7, 0.8, 0.9]);
    assert.deepEqual(s.m, [1, 0.9, 0.8, 0.7, 0.6]);
    assert.deepEqual(s.m2, [1, 0.8, 0.6, 0.4, 0.2]);
  });

  it('one gateway: m2 repeats m', () => {
    const s = thinSeries([{ t: 0, bytes: 1, m: [0.5] }], 0, 2);
    assert.deepEqual(s, { t: [0], u: [0.5], m: [0.5], m2: [0.5] });
  });
});
