import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import calculateSlot from 'cluster-key-slot';
import { makeIdentity } from '../../../src/quota/policy.js';
import { slotRanges } from '../../../src/valkey/cluster.js';
import {
  clientAddress,
  clientAddressV6,
  isFlooder,
  keySampler,
  zipfCdf,
} from '../../../src/bench/run/keys.js';
import { parseTarget, runFileName } from '../../../src/bench/run/config.js';
import type { RunConfig } from '../../../src/bench/run/config.js';

function histogram(draw: () => number, n: number, keys: number): number[] {
  const counts = new Array<number>(keys).fill(0);
  for (let i = 0; i < n; i++) counts[draw()]!++;
  return counts;
}

describe('load key generation', { timeout: 60_000 }, () => {
  it('draws uniformly: every identity near its fair share, none outside the range', () => {
    const keys = 100;
    const n = 200_000;
    const counts = histogram(
      keySampler({ keys, distribution: 'uniform', zipfExponent: 1, seed: 7 }),
      n,
      keys,
    );
    assert.equal(
      counts.reduce((a, b) => a + b, 0),
      n,
    );
    const fair = n / keys;
    // 2000 expected per key, sd ~44: 15% either way is > 6 sd.
    for (const c of counts) assert.ok(Math.abs(c - fair) < 0.15 * fair, `count ${c} vs ${fair}`);
  });

  it('draws by Zipf: rank frequencies follow 1/k^s', () => {
    const keys = 1000;
    const s = 1.1;
    const n = 300_000;
    const counts = histogram(
      keySampler({ keys, distribution: 'zipf', zipfExponent: s, seed: 3 }),
      n,
      keys,
    );
    const cdf = zipfCdf(keys, s);
    for (const k of [0, 1, 4, 9]) {
      const expected = (k === 0 ? cdf[0]! : cdf[k]! - cdf[k - 1]!) * n;
      assert.ok(
        Math.abs(counts[k]! - expected) < 0.05 * expected,
        `rank ${k + 1}: ${counts[k]} vs ${expected}`,
      );
    }
    // The heaviest hitter takes far more than a uniform share; the tail still gets traffic.
    assert.ok(counts[0]! > 50 * (n / keys));
    assert.ok(counts.slice(500).reduce((a, b) => a + b, 0) > 0.05 * n);
    assert.equal(cdf[keys - 1], 1);
  });

  it('is reproducible from its seed and differs across seeds', () => {
    const plan = { keys: 5000, distribution: 'zipf' as const, zipfExponent: 1.0, seed: 42 };
    const a = keySampler(plan);
    const b = keySampler(plan);
    const c = keySampler({ ...plan, seed: 43 });
    const seqA = Array.from({ length: 50 }, a);
    assert.deepEqual(Array.from({ length: 50 }, b), seqA);
    assert.notDeepEqual(Array.from({ length: 50 }, c), seqA);
  });

  it('spreads identities over every cluster primary once the gateway hashes them', () => {
    const ranges = slotRanges();
    const perPrimary = new Array<number>(ranges.length).fill(0);
    const slots = new Set<number>();
    const keys = 3000;
    for (let i = 0; i < keys; i++) {
      const identity = makeIdentity('ip', clientAddress(i), 'default', 'sluice-v1');
      const slot = calculateSlot(`bench:write:default:1:${identity.key}`);
      slots.add(slot);
      perPrimary[ranges.findIndex(([lo, hi]) => slot >= lo && slot <= hi)]!++;
    }
    // About a third each (1000 +- 3 sd is ~ 920..1080), and thousands of distinct slots.
    for (const n of perPrimary)
      assert.ok(n > 900 && n < 1100, `per primary: ${perPrimary.join(', ')}`);
    assert.ok(slots.size > 2500, `only ${slots.size} distinct slots`);
  });

  it('names clients by distinct addresses and marks the flood share', () => {
    assert.equal(clientAddress(0), '10.0.0.0');
    assert.equal(clientAddress(70_000), '10.1.17.112');
    assert.throws(() => clientAddress(2 ** 24), RangeError);
    // --ipv6-clients: a /64 each, 256 to a /56 (as 256 IPv4 clients to a /24).
    assert.equal(clientAddressV6(0), '2001:db8:0:0::1');
    assert.equal(clientAddressV6(70_000), '2001:db8:1:1170::1');
    assert.throws(() => clientAddressV6(2 ** 24), RangeError);
    const flooders = Array.from({ length: 1000 }, (_, i) => isFlooder(i, 1000, 0.9)).filter(
      Boolean,
    );
    assert.equal(flooders.length, 900);
    assert.throws(
      () => keySampler({ keys: 0, distribution: 'uniform', zipfExponent: 1, seed: 1 }),
      RangeError,
    );
  });

  it('names result files the standard way, without a colon', () => {
    const target = parseTarget('valkey-glide:cluster');
    assert.deepEqual(target, { implementation: 'valkey-glide', mode: 'cluster' });
    const cfg = {
      ...target,
      workload: 'light',
      connections: 50,
      durationSec: 30,
      run: 2,
    } as RunConfig;
    assert.equal(runFileName(cfg), 'valkey-glide_cluster_light_50c_30s_run2.json');
    assert.throws(() => parseTarget('redis'), /unknown implementation "redis"/);
    assert.throws(() => parseTarget('iovalkey:sentinel'), /unknown topology/);
  });
});
