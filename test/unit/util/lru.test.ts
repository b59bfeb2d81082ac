/**
 * The gateway's LRU caches (util/lru.ts): deleting the last entry left does not refill
 * lru-cache's preallocated arrays (a clear of O(max) at every write of a quiet gateway), the
 * cache still behaves as lru-cache does, and every cache in src/ is made through Lru.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { PROJECT_ROOT } from '../../../src/harness/paths.js';
import { Lru } from '../../../src/util/lru.js';
import { SeenIds } from '../../../src/write/seen-ids.js';

const MAX = 200_000;

/** Calls of Array.prototype.fill on arrays of at least `MAX` slots while `run` runs. */
function bigFills(run: () => void): number {
  const fill = Array.prototype.fill;
  let n = 0;
  Array.prototype.fill = function (this: unknown[], ...args: Parameters<typeof fill>) {
    if (this.length >= MAX) n++;
    return fill.apply(this, args) as unknown[];
  } as typeof fill;
  try {
    run();
  } finally {
    Array.prototype.fill = fill;
  }
  return n;
}

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

describe('Lru', { timeout: 20_000 }, () => {
  it('deletes the last entry left without refilling its arrays, and serves on', () => {
    const cache = new Lru<string, number>({ max: MAX, ttl: 30_000, ttlAutopurge: false });
    const fills = bigFills(() => {
      for (let i = 0; i < 50; i++) {
        cache.set(`k${i}`, i);
        assert.equal(cache.delete(`k${i}`), true);
        assert.equal(cache.size, 0);
        assert.equal(cache.has(`k${i}`), false);
      }
    });
    assert.equal(fills, 0);
    // Still an LRU: past max, the least recently used goes; a key's value is its own.
    const small = new Lru<string, number>({ max: 2 });
    small.set('a', 1);
    assert.equal(small.delete('a'), true);
    small.set('b', 2);
    small.set('c', 3);
    small.get('b');
    small.set('d', 4);
    assert.deepEqual([...small.keys()].sort(), ['b', 'd']);
    assert.equal(small.delete('zzz'), false);
    assert.equal(small.get('b'), 2);
  });

  it('a stale last entry and one of several are deleted too', () => {
    let now = 1_000;
    const cache = new Lru<string, number>({
      max: MAX,
      ttl: 10,
      ttlAutopurge: false,
      perf: { now: () => now },
    });
    const fills = bigFills(() => {
      cache.set('old', 1);
      now += 100; // stale, still held
      assert.equal(cache.delete('old'), true);
      assert.equal(cache.size, 0);
      cache.set('x', 1);
      cache.set('y', 2);
      assert.equal(cache.delete('x'), true);
      assert.equal(cache.get('y'), 2);
    });
    assert.equal(fills, 0);
  });

  it("dispose hears a delete as lru-cache's own delete says it, and an eviction as one", () => {
    const heard: string[] = [];
    const cache = new Lru<string, number>({
      max: 2,
      dispose: (v, k, reason) => heard.push(`${k}=${v}:${reason}`),
    });
    cache.set('a', 1);
    cache.delete('a');
    cache.set('b', 2);
    cache.set('c', 3);
    cache.delete('b');
    cache.set('d', 4);
    cache.set('e', 5);
    assert.deepEqual(heard, ['a=1:delete', 'b=2:delete', 'c=3:evict']);
  });

  it('a write awaited and settled on a quiet gateway costs no refill', () => {
    const seen = new SeenIds(MAX, {
      kv: () => {
        throw new Error('no store in this test');
      },
      down: () => true,
      keyPrefix: () => 'p',
    });
    const event = { id: 'a'.repeat(64), sig: 'b'.repeat(128) };
    const fills = bigFills(() => {
      for (let i = 0; i < 20; i++) {
        seen.begin(event);
        assert.equal(seen.inFlight(event), true);
        seen.settled(event);
        assert.equal(seen.inFlight(event), false);
      }
    });
    assert.equal(fills, 0);
  });

  it('every cache in src/ is an Lru', () => {
    const own = path.join(PROJECT_ROOT, 'src', 'util', 'lru.ts');
    const offenders = sources(path.join(PROJECT_ROOT, 'src'))
      .filter((f) => f !== own && /from 'lru-cache'/.test(readFileSync(f, 'utf8')))
      .map((f) => path.relative(PROJECT_ROOT, f));
    assert.deepEqual(offenders, []);
  });
});
