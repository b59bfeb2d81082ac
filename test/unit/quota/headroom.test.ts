/**
 * What the Nostr path reads to choose between hashing and verifying an author's event
 * (src/quota/headroom.ts): room only where a counter's last answer showed it, in its window.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Headroom, headroomMargin } from '../../../src/quota/headroom.js';
import { clientKey } from '../../../src/store/index.js';
import { manualClock } from '../../helpers/fake-valkey.js';

const KEY = clientKey('author');
const allowed = (remaining: number, limit = 20, until?: number) => ({
  outcome: 'allowed',
  remaining,
  limit,
  resetSec: 60,
  receipt: until === undefined ? undefined : { until },
});

describe('author headroom', { timeout: 10_000 }, () => {
  it('keeps a quarter of the limit (at least one point) as margin', () => {
    assert.deepEqual([1, 4, 20, 21].map(headroomMargin), [1, 1, 5, 6]);
  });

  it('unknown, or within the margin of the limit: no room; far from it: room', () => {
    const clock = manualClock();
    const h = new Headroom(10, clock.now);
    assert.equal(h.roomFor(KEY, 1), false, 'unknown');
    h.learn(KEY, allowed(6));
    assert.equal(h.roomFor(KEY, 1), true, '6 left, 1 spent, 5 kept');
    assert.equal(h.roomFor(KEY, 2), false, 'into the margin');
    h.learn(KEY, { ...allowed(0), outcome: 'limited' });
    assert.equal(h.roomFor(KEY, 1), false, 'refused');
  });

  it('an unknown key: one write at a time on the hash; a known one: its room less what is reserved', () => {
    const clock = manualClock();
    const h = new Headroom(10, clock.now);
    assert.equal(h.reserve(KEY, 1), true, 'first sight');
    assert.equal(h.reserve(KEY, 1), false, 'a second while the first is in its checks');
    assert.equal(h.mayReserve(KEY, 1), false);
    h.release(KEY, 1);
    assert.equal(h.reserve(KEY, 1), true, 'the first done, uncharged: unknown still');
    h.learn(KEY, allowed(12)); // 12 left, margin 5: 7 to reserve
    h.release(KEY, 1);
    const taken = Array.from({ length: 10 }, () => h.reserve(KEY, 1)).filter(Boolean).length;
    assert.equal(taken, 7, 'concurrent writes of a known key: its remaining less the margin');
    for (let i = 0; i < taken; i++) h.release(KEY, 1);
    assert.equal(h.reservedKeys, 0);
    clock.advance(60_000);
    assert.equal(h.reserve(KEY, 1), true, 'its window over: unknown again, one at a time');
    assert.equal(h.reserve(KEY, 1), false);
  });

  it('forgets at the end of the window the numbers belong to', () => {
    const clock = manualClock();
    const h = new Headroom(10, clock.now);
    h.learn(KEY, allowed(15, 20, clock.now() + 1000));
    assert.equal(h.roomFor(KEY, 1), true);
    clock.advance(1000);
    assert.equal(h.roomFor(KEY, 1), false);
  });

  it('short: less than the cost left, in a window still running, and until when', () => {
    const clock = manualClock();
    const h = new Headroom(10, clock.now);
    const until = clock.now() + 5000;
    assert.equal(h.short(KEY, 1), undefined, 'unknown: not known short');
    h.learn(KEY, allowed(1, 20, until));
    assert.equal(h.short(KEY, 1), undefined, 'room for 1');
    assert.equal(h.short(KEY, 2)?.until, until, 'not for 2, till its window ends');
    h.learn(KEY, { ...allowed(0, 20, until), outcome: 'limited' });
    assert.deepEqual(h.short(KEY, 1), { remaining: 0, limit: 20, until });
    clock.advance(5000);
    assert.equal(h.short(KEY, 1), undefined, 'its window over');
  });

  it("an insured or failed decision is not the counter's: forgotten", () => {
    const h = new Headroom(10, manualClock().now);
    h.learn(KEY, allowed(15));
    h.learn(KEY, { ...allowed(15), outcome: 'insured' });
    assert.equal(h.roomFor(KEY, 1), false);
  });

  it('a free key (no limit applies) has room for a while; bounded in keys', () => {
    const clock = manualClock();
    const h = new Headroom(2, clock.now);
    h.learn(KEY, null);
    assert.equal(h.roomFor(KEY, 1000), true);
    clock.advance(60_000);
    assert.equal(h.roomFor(KEY, 1), false);
    for (const k of ['a', 'b', 'c']) h.learn(clientKey(k), null);
    assert.equal(h.size, 2);
  });
});
