import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { GatewayConfigSchema } from '../../../src/config/schema.js';
import {
  compileCosts,
  eventCost,
  kindMatcher,
  kindPoints,
  parseKindSpec,
} from '../../../src/nostr/costs.js';

const base = {
  admin: { token: '0123456789abcdef-costs' },
  upstreams: [{ id: 'relay-a', url: 'http://127.0.0.1:7001' }],
};

/** The issues zod reports for a nostr section, as "path: message" lines. */
function nostrIssues(nostr: unknown): string[] {
  const res = GatewayConfigSchema.safeParse({ ...base, nostr });
  return res.success ? [] : res.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
}

describe('event costs (pure)', { timeout: 10_000 }, () => {
  const table = compileCosts({
    kinds: { '1': 1, '7': 1, '1984': 20, '30000-39999': 5, '30023': 9, '20000-29999': 0 },
    default: 2,
    perKiB: { points: 3, freeBytes: 1024 },
  });

  it('prices a kind by its own entry, else its range, else the default', () => {
    assert.equal(kindPoints(table, 1984), 20);
    assert.equal(kindPoints(table, 30000), 5);
    assert.equal(kindPoints(table, 39999), 5);
    assert.equal(kindPoints(table, 30023), 9, 'a single kind wins over the range holding it');
    assert.equal(kindPoints(table, 40000), 2);
    assert.equal(kindPoints(table, 0), 2);
  });

  it('adds points per started KiB above the free size; free kinds stay free', () => {
    assert.equal(eventCost(table, 1, 1024), 1, 'at the free size: nothing more');
    assert.equal(eventCost(table, 1, 1025), 1 + 3, 'one byte over starts a KiB');
    assert.equal(eventCost(table, 1, 1024 + 2048), 1 + 6);
    assert.equal(eventCost(table, 1984, 5000), 20 + Math.ceil((5000 - 1024) / 1024) * 3);
    assert.equal(eventCost(table, 20001, 100_000), 0, 'an ephemeral kind priced 0 stays 0');
  });

  it('without perKiB, size costs nothing', () => {
    const flat = compileCosts({ kinds: {}, default: 1 });
    assert.equal(eventCost(flat, 1, 10_000_000), 1);
  });

  it('parses kinds and inclusive ranges, and nothing else', () => {
    assert.deepEqual(parseKindSpec('7'), { lo: 7, hi: 7 });
    assert.deepEqual(parseKindSpec(7), { lo: 7, hi: 7 });
    assert.deepEqual(parseKindSpec('30000-39999'), { lo: 30000, hi: 39999 });
    for (const bad of ['', 'x', '-1', '5-3', '70000', '1-70000', '1.5', '1-', '1--2']) {
      assert.equal(parseKindSpec(bad), undefined, bad);
    }
  });

  it('matches blocked kinds, single and ranges', () => {
    const blocked = kindMatcher([4, '1000-1999']);
    assert.equal(blocked(4), true);
    assert.equal(blocked(1500), true);
    assert.equal(blocked(2000), false);
    assert.equal(kindMatcher([])(4), false);
  });
});

describe('event cost configuration', { timeout: 10_000 }, () => {
  it('defaults to one point per event, nothing blocked', () => {
    const cfg = GatewayConfigSchema.parse(base);
    assert.deepEqual(cfg.nostr.costs, { kinds: {}, default: 1 });
    assert.deepEqual(cfg.nostr.blockedKinds, []);
  });

  it('names a malformed kind, a negative cost and overlapping ranges', () => {
    const issues = nostrIssues({
      costs: { kinds: { abc: 1, '10-5': 1, '1': -1, '100-200': 1, '150-300': 2 } },
    });
    assert.ok(
      issues.some((i) => /^nostr\.costs\.kinds\.abc: "abc" is not a kind/.test(i)),
      issues.join('\n'),
    );
    assert.ok(
      issues.some((i) => /^nostr\.costs\.kinds\.10-5: /.test(i)),
      issues.join('\n'),
    );
    assert.ok(
      issues.some((i) => /^nostr\.costs\.kinds\.1: /.test(i)),
      issues.join('\n'),
    );
    assert.ok(
      issues.some((i) => /^nostr\.costs\.kinds\.150-300: overlaps "100-200"/.test(i)),
      issues.join('\n'),
    );
  });

  it('accepts a single kind inside a range, and refuses a malformed blocked kind', () => {
    assert.deepEqual(nostrIssues({ costs: { kinds: { '30000-39999': 5, '30023': 9 } } }), []);
    const issues = nostrIssues({ blockedKinds: [4, '9-1'] });
    assert.ok(
      issues.some((i) => /^nostr\.blockedKinds\.1: "9-1" is not a kind/.test(i)),
      issues.join('\n'),
    );
  });

  it('refuses a perKiB of zero points', () => {
    const issues = nostrIssues({ costs: { perKiB: { points: 0 } } });
    assert.ok(
      issues.some((i) => i.startsWith('nostr.costs.perKiB.points')),
      issues.join('\n'),
    );
  });
});
