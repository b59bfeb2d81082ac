/** Maybe: values stay values (no promise, no turn), promises stay promises. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { after, allOf } from '../../../src/util/maybe.js';

describe('Maybe', { timeout: 5_000 }, () => {
  it('after() runs at once on a value and after a promise on a promise', async () => {
    const now = after(2, (n) => n * 3);
    assert.equal(now, 6);
    const later = after(Promise.resolve(2), (n) => n * 3);
    assert.ok(later instanceof Promise);
    assert.equal(await later, 6);
    // A function that itself waits makes the result a promise.
    const chained = after(2, (n) => Promise.resolve(n + 1));
    assert.equal(await chained, 3);
  });

  it('allOf() gives the array itself when nothing waits, else one promise of all', async () => {
    const values = allOf([1, 2, 3]);
    assert.deepEqual(values, [1, 2, 3]);
    assert.ok(!(values instanceof Promise));
    const mixed = allOf([1, Promise.resolve(2), 3]);
    assert.ok(mixed instanceof Promise);
    assert.deepEqual(await mixed, [1, 2, 3]);
  });

  it('a rejection stays a rejection through after()', async () => {
    const failed = after(Promise.reject(new Error('store down')), () => 1);
    await assert.rejects(Promise.resolve(failed), /store down/);
  });
});
