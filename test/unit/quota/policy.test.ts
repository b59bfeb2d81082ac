import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { describe, it } from 'node:test';
import { validateGatewayConfig } from '../../../src/config/load.js';
import { ClientAddress } from '../../../src/gateway/client-address.js';
import { parseRequestTarget } from '../../../src/gateway/request-target.js';
import { Policy, resolveIdentity } from '../../../src/quota/policy.js';
import { clientKey } from '../../../src/store/keys.js';

const SALT = 'test-salt';

const premiumHash = createHash('sha256').update('secret-premium-key').digest('hex');
const config = validateGatewayConfig({
  admin: { token: 'x'.repeat(16) },
  upstreams: [{ id: 'a', url: 'http://127.0.0.1:1' }],
  quotas: {
    tiers: {
      default: { write: { points: 10, windowSec: 10 } },
      premium: { write: { points: 100, windowSec: 10 } },
    },
    apiKeys: { 'plain-key': 'premium', [`sha256:${premiumHash}`]: 'premium' },
    routes: [
      { path: '/healthz', class: 'exempt' },
      { path: '/search', method: 'post', class: 'read' },
      { path: '/bulk', class: 'write', cost: 5 },
    ],
    allowList: ['10.0.0.9'],
  },
});
const policy = new Policy(config.quotas);

describe('policy', { timeout: 30_000 }, () => {
  it('classifies writes by method unless a route says otherwise', () => {
    assert.deepEqual(policy.classify('POST', '/events'), { cls: 'write', cost: 1 });
    assert.deepEqual(policy.classify('DELETE', '/x'), { cls: 'write', cost: 1 });
    assert.deepEqual(policy.classify('GET', '/events'), { cls: 'read', cost: 1 });
    assert.deepEqual(policy.classify('GET', '/healthz'), { cls: 'exempt', cost: 1 });
    assert.deepEqual(policy.classify('POST', '/search'), { cls: 'read', cost: 1 });
    assert.deepEqual(policy.classify('POST', '/bulk/items'), { cls: 'write', cost: 5 });
    assert.deepEqual(
      policy.classify('POST', '/bulkier'),
      { cls: 'write', cost: 1 },
      'prefixes match whole segments',
    );
  });

  it('maps known API keys (plain or sha256) to tiers and ignores unknown ones', () => {
    const order = ['apiKey', 'pubkey', 'ip'] as const;
    assert.equal(
      resolveIdentity({ apiKey: 'plain-key', ip: '1.1.1.1' }, order, policy, SALT).tier,
      'premium',
    );
    assert.equal(
      resolveIdentity({ apiKey: 'secret-premium-key', ip: '1.1.1.1' }, order, policy, SALT).tier,
      'premium',
    );
    // An unknown key must not become an identity: random keys would each get a fresh quota.
    assert.deepEqual(resolveIdentity({ apiKey: 'made-up', ip: '1.1.1.1' }, order, policy, SALT), {
      source: 'ip',
      value: 'ip:1.1.1.1',
      raw: '1.1.1.1',
      tier: 'default',
      key: clientKey('ip:1.1.1.1', SALT),
    });
    assert.equal(
      resolveIdentity({ verifiedPubkey: 'ab'.repeat(32), ip: '1.1.1.1' }, order, policy, SALT)
        .source,
      'pubkey',
    );
    assert.equal(
      resolveIdentity({ verifiedPubkey: 'ab'.repeat(32), ip: '1.1.1.1' }, ['ip'], policy, SALT)
        .source,
      'ip',
    );
  });

  it('knows the allow-list and changes base limits at runtime', () => {
    assert.equal(policy.isAllowListed(['10.0.0.9']), true);
    assert.equal(policy.isAllowListed(['10.0.0.8']), false);
    const p = new Policy(config.quotas);
    p.setLimit('default', 'write', { points: 3, windowSec: 10 });
    assert.deepEqual(p.limitOf('default', 'write'), { points: 3, windowSec: 10 });
    assert.equal(
      p.limitOf('default', 'read'),
      undefined,
      'reads are free unless a tier limits them',
    );
    assert.deepEqual(
      policy.limitOf('default', 'write'),
      { points: 10, windowSec: 10 },
      'the original is untouched',
    );
  });
});

describe('deny routes on the path as the relay reads it', { timeout: 30_000 }, () => {
  const classifyRaw = (p: Policy, method: string, raw: string) => {
    const target = parseRequestTarget(raw);
    assert.ok(target, raw);
    return p.classify(method, target.path);
  };
  const denied = { cls: 'deny', cost: 0 };

  it("denies the reference relay's operator paths by default, however spelled", () => {
    for (const raw of [
      '/admin/drain',
      '/admin',
      '/admin/',
      '/stats',
      '/metrics',
      '/metrics?x=1',
      '/%61dmin/drain',
      '/ADMIN/drain',
      '/Stats',
      '/admin%2Fdrain',
      '/admin//drain',
      '/./admin/spike',
      '/events/../admin/drain',
      '/x/%2e%2e/admin/drain',
      'http://relay.example/admin/drain',
      'HTTPS://x/%53tats',
    ]) {
      for (const method of ['GET', 'POST']) {
        assert.deepEqual(classifyRaw(policy, method, raw), denied, `${method} ${raw}`);
      }
    }
    for (const raw of ['/administrator', '/statsd', '/events', '/', '/metrics-public']) {
      assert.notEqual(classifyRaw(policy, 'GET', raw).cls, 'deny', raw);
    }
  });

  it('pays the cost of a route whatever the spelling of its path', () => {
    const p = new Policy(
      validateGatewayConfig({
        admin: { token: 'x'.repeat(16) },
        upstreams: [{ id: 'a', url: 'http://127.0.0.1:1' }],
        quotas: { routes: [{ path: '/events', method: 'POST', class: 'write', cost: 4 }] },
      }).quotas,
    );
    for (const raw of [
      '/events',
      '/%65vents',
      '/%65%76ents/',
      '/x/../events',
      '/events//',
      'http://h/events',
    ]) {
      assert.deepEqual(classifyRaw(p, 'POST', raw), { cls: 'write', cost: 4 }, raw);
    }
  });

  it('keeps the default denies when routes are added; denyPaths: [] forwards them', () => {
    const withRoutes = (quotas: Record<string, unknown>) =>
      new Policy(
        validateGatewayConfig({
          admin: { token: 'x'.repeat(16) },
          upstreams: [{ id: 'a', url: 'http://127.0.0.1:1' }],
          quotas,
        }).quotas,
      );
    const added = withRoutes({ routes: [{ path: '/', class: 'exempt' }] });
    assert.deepEqual(added.classify('POST', '/admin/drain'), denied, 'denies come before routes');
    assert.deepEqual(added.classify('POST', '/events'), { cls: 'exempt', cost: 1 });

    const open = withRoutes({ denyPaths: [] });
    assert.deepEqual(open.classify('GET', '/stats'), { cls: 'read', cost: 1 });

    const own = withRoutes({
      denyPaths: ['/private/'],
      routes: [
        { path: '/Internal', class: 'deny' },
        { path: '/Events', class: 'exempt' },
      ],
    });
    assert.deepEqual(own.classify('GET', '/private'), denied, 'a trailing slash still denies');
    assert.deepEqual(own.classify('GET', '/INTERNAL/x'), denied, 'deny routes ignore case');
    assert.deepEqual(own.classify('GET', '/stats'), { cls: 'read', cost: 1 });
    assert.deepEqual(own.classify('GET', '/events'), { cls: 'read', cost: 1 }, 'others do not');
    assert.equal(own.limitOf('default', 'deny'), undefined);
  });
});

function fakeRequest(peer: string, xff?: string): IncomingMessage {
  return {
    socket: { remoteAddress: peer },
    headers: xff ? { 'x-forwarded-for': xff } : {},
  } as unknown as IncomingMessage;
}

describe('client address', { timeout: 30_000 }, () => {
  it('ignores X-Forwarded-For from an untrusted peer', () => {
    const addr = new ClientAddress([]);
    const req = fakeRequest('203.0.113.5', '1.2.3.4');
    assert.equal(addr.ip(req), '203.0.113.5');
    assert.equal(addr.forwardedFor(req), '203.0.113.5');
  });

  it('believes a trusted proxy and extends its chain', () => {
    const addr = new ClientAddress(['10.0.0.0/8']);
    const req = fakeRequest('10.1.2.3', '198.51.100.7');
    assert.equal(addr.ip(req), '198.51.100.7');
    assert.equal(addr.forwardedFor(req), '198.51.100.7, 10.1.2.3');
  });

  it('stops at the first untrusted hop, so a client cannot prepend its own entries', () => {
    const addr = new ClientAddress(['10.0.0.0/8']);
    const req = fakeRequest('10.1.2.3', '6.6.6.6, 198.51.100.7');
    assert.equal(addr.ip(req), '198.51.100.7');
  });

  it('folds IPv4-mapped IPv6 addresses into one spelling', () => {
    assert.equal(new ClientAddress([]).ip(fakeRequest('::ffff:127.0.0.1')), '127.0.0.1');
  });

  it('rejects a malformed trusted proxy entry at start', () => {
    assert.throws(() => new ClientAddress(['not-an-ip']), /trustedProxies/);
  });

  it('a pinned policy answers as it did when pinned, whatever changes after (one snapshot a request)', () => {
    const live = new Policy(config.quotas);
    const pinned = live.pin();
    live.reload({ ...config.quotas, allowList: [] });
    live.setLimit('default', 'write', { points: 3, windowSec: 5 });
    live.setTierMode('premium', 'shadow');
    live.setMode('shadow');
    live.setPubkeyTiers(new Map([['a'.repeat(64), 'premium']]));
    assert.deepEqual(pinned.limitOf('default', 'write'), { points: 10, windowSec: 10 });
    assert.equal(pinned.modeOf('premium'), 'enforce');
    assert.equal(pinned.mode, 'enforce');
    assert.equal(pinned.tierOfPubkey('a'.repeat(64)), undefined);
    assert.equal(pinned.isAllowListed(['10.0.0.9']), true);
    assert.throws(() => pinned.setMode('shadow'), /pinned/);
    // The live policy took every change; a new pin sees them.
    const now = live.pin();
    assert.deepEqual(now.limitOf('default', 'write'), { points: 3, windowSec: 5 });
    assert.equal(now.modeOf('premium'), 'shadow');
    assert.equal(now.isAllowListed(['10.0.0.9']), false);
  });
});
