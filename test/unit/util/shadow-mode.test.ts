/** Shadow mode logs what it would have refused at a sampled rate: the sampler, on an injected clock. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { IntervalSampler } from '../../../src/util/sampler.js';

describe('shadow-mode log sampling', { timeout: 10_000 }, () => {
  it('takes the first event, then one per interval carrying the count it stands for', () => {
    let now = 1_000;
    const sampler = new IntervalSampler(1000, () => now);
    assert.equal(sampler.take(), 1);
    assert.equal(sampler.take(), 0);
    now += 500;
    assert.equal(sampler.take(), 0);
    now += 500;
    assert.equal(sampler.take(), 3, 'the two skipped and this one');
    assert.equal(sampler.take(), 0);
  });
});
