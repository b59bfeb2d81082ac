/**
 * Nested address ranges: the networks holding a client (every spelling of it one range), and
 * the configuration that refuses ranges an honest client alone in its range would notice.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { GatewayConfigSchema } from '../../../src/config/schema.js';
import { Policy } from '../../../src/quota/policy.js';
import { rangeRules, rangesOf } from '../../../src/quota/ranges.js';
import { clientNetwork, enclosingNetwork } from '../../../src/util/ip-network.js';

const base = {
  admin: { token: 'ranges-unit-admin-token-0123' },
  upstreams: [{ id: 'relay-a', url: 'http://127.0.0.1:9' }],
};

describe('the networks holding a client', { timeout: 10_000 }, () => {
  const cases: [string, 'ipv4' | 'ipv6', number, string | undefined][] = [
    ['2001:db8:1:2::/64', 'ipv6', 56, '2001:db8:1::/56'],
    ['2001:db8:1:2ff::/64', 'ipv6', 56, '2001:db8:1:200::/56'],
    ['2001:db8:1:2ff::/64', 'ipv6', 48, '2001:db8:1::/48'],
    ['2001:db8:1:2:3:4:5:6', 'ipv6', 64, '2001:db8:1:2::/64'],
    ['2001:db8:1:2::/64', 'ipv6', 64, undefined],
    ['2001:db8:1:2::/64', 'ipv6', 72, undefined],
    ['2001:db8:1:2::/64', 'ipv4', 24, undefined],
    ['198.51.100.77', 'ipv4', 24, '198.51.100.0/24'],
    ['198.51.100.77', 'ipv4', 16, '198.51.0.0/16'],
    ['198.51.100.77', 'ipv4', 1, '128.0.0.0/1'],
    ['198.51.100.77', 'ipv4', 32, undefined],
    ['198.51.100.77', 'ipv6', 56, undefined],
    ['not-an-address', 'ipv6', 48, undefined],
    ['not-an-address', 'ipv4', 24, undefined],
  ];
  for (const [client, family, prefix, expected] of cases) {
    it(`${client} in its ${family} /${prefix}: ${expected ?? 'none'}`, () => {
      assert.equal(enclosingNetwork(client, family, prefix), expected);
    });
  }

  it('every spelling of an address is in the same ranges as its client network', () => {
    const group = fc.integer({ min: 0, max: 0xffff });
    const groups = fc.array(group, { minLength: 8, maxLength: 8 });
    fc.assert(
      fc.property(groups, fc.integer({ min: 1, max: 63 }), (g, prefix) => {
        fc.pre(g[0] !== 0); // clear of v4-mapped and other special space
        const short = g.map((x) => x.toString(16)).join(':');
        const long = g.map((x) => x.toString(16).padStart(4, '0').toUpperCase()).join(':');
        const spellings = [short, long, `${short}%eth0`, `[${long}]:443`];
        const ranges = spellings.map((s) => enclosingNetwork(clientNetwork(s, 64), 'ipv6', prefix));
        assert.equal(new Set(ranges).size, 1, JSON.stringify(ranges));
        assert.equal(ranges[0], clientNetwork(short, prefix), 'the range is the masked network');
      }),
      { numRuns: 500 },
    );
  });

  it('ranges come narrowest first, each under its own tier; none while off', () => {
    const cfg = GatewayConfigSchema.parse({ ...base, quotas: { ranges: { enabled: true } } });
    const rules = rangeRules(cfg.quotas.ranges);
    assert.deepEqual(rangesOf('2001:db8:1:2::/64', rules), [
      { tier: 'range:ipv6/56', network: '2001:db8:1::/56' },
      { tier: 'range:ipv6/48', network: '2001:db8:1::/48' },
    ]);
    assert.deepEqual(rangesOf('198.51.100.7', rules), [
      { tier: 'range:ipv4/24', network: '198.51.100.0/24' },
    ]);
    const off = GatewayConfigSchema.parse(base);
    assert.deepEqual(new Policy(off.quotas).rangesOf('198.51.100.7'), []);
  });

  it("a range's tier has its write limit, no read limit, and the default tier's mode", () => {
    const cfg = GatewayConfigSchema.parse({
      ...base,
      quotas: {
        tiers: { default: { write: { points: 10, windowSec: 60 }, mode: 'shadow' } },
        ranges: {
          enabled: true,
          ipv6: [{ prefixLength: 48, write: { points: 50, windowSec: 60 } }],
        },
      },
    });
    const policy = new Policy(cfg.quotas);
    assert.deepEqual(policy.limitOf('range:ipv6/48', 'write'), { points: 50, windowSec: 60 });
    assert.equal(policy.limitOf('range:ipv6/48', 'read'), undefined);
    assert.equal(policy.modeOf('range:ipv6/48'), 'shadow');
  });
});

describe('quotas.ranges configuration', { timeout: 10_000 }, () => {
  const problems = (quotas: object, identity: object = {}) => {
    const r = GatewayConfigSchema.safeParse({ ...base, quotas, identity });
    return r.success ? [] : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
  };
  const write = (points: number) => ({ points, windowSec: 60 });

  it('the defaults are valid, off, and four clients of the default tier per range', () => {
    assert.deepEqual(problems({ ranges: { enabled: true } }), []);
    const cfg = GatewayConfigSchema.parse(base);
    assert.equal(cfg.quotas.ranges.enabled, false);
    assert.deepEqual(
      cfg.quotas.ranges.ipv6.map((r) => r.prefixLength),
      [56, 48],
    );
  });

  it('refuses a range no shorter than the client itself', () => {
    const [p] = problems({
      ranges: { enabled: true, ipv6: [{ prefixLength: 64, write: write(9000) }] },
    });
    assert.match(
      p!,
      /^quotas\.ranges\.ipv6\.0\.prefixLength: \/64 is not shorter than identity\.ipv6PrefixLength/,
    );
    assert.deepEqual(
      problems(
        { ranges: { enabled: true, ipv6: [{ prefixLength: 56, write: write(9000) }] } },
        { ipv6PrefixLength: 48 },
      ).length,
      1,
    );
    const [v4] = problems({
      ranges: { enabled: true, ipv4: [{ prefixLength: 32, write: write(9000) }] },
    });
    assert.match(v4!, /not shorter than the address/);
  });

  it('refuses a range tighter than the default tier, or than a range inside it', () => {
    const [tight] = problems({
      ranges: { enabled: true, ipv4: [{ prefixLength: 24, write: write(100) }] },
    });
    assert.match(tight!, /fewer writes a second than the default tier/);
    const [inverted] = problems({
      ranges: {
        enabled: true,
        ipv6: [
          { prefixLength: 56, write: write(3000) },
          { prefixLength: 48, write: write(2000) },
        ],
      },
    });
    assert.match(inverted!, /^quotas\.ranges\.ipv6\.1\.write: .*a range inside it/);
    // Off, nothing is checked (the ranges are not charged).
    assert.deepEqual(problems({ ranges: { ipv4: [{ prefixLength: 24, write: write(1) }] } }), []);
  });

  it('refuses a prefix twice, and tier names that ranges use', () => {
    const twice = problems({
      ranges: {
        enabled: true,
        ipv4: [24, 24].map((prefixLength) => ({ prefixLength, write: write(9000) })),
      },
    });
    assert.match(twice[0]!, /appears twice/);
    const [named] = problems({
      tiers: { default: { write: write(600) }, 'range:ipv6/56': { write: write(1) } },
    });
    assert.match(named!, /are the address ranges' own/);
  });
});
