import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError, loadGatewayConfig } from '../src/config/load.js';

const dir = mkdtempSync(path.join(tmpdir(), 'sluice-config-'));
function file(name: string, text: string): string {
  const p = path.join(dir, name);
  writeFileSync(p, text);
  return p;
}
const minimal =
  'admin:\n  token: 0123456789abcdef\nupstreams:\n  - id: relay-a\n    url: http://127.0.0.1:7001\n';

describe('gateway configuration', { timeout: 30_000 }, () => {
  it('fills defaults: loopback, glide on standalone, sticky routing, quotas that insure', () => {
    const cfg = loadGatewayConfig({ file: file('min.yaml', minimal), env: {} });
    assert.equal(cfg.listen.host, '127.0.0.1');
    assert.equal(cfg.admin.host, '127.0.0.1');
    assert.equal(cfg.valkey.client, 'valkey-glide');
    assert.equal(cfg.routing, 'sticky');
    assert.equal(cfg.quotas.onStoreFailure, 'insure');
    assert.deepEqual(cfg.trustedProxies, []);
    assert.equal(cfg.logging.requests, false);
  });

  it('lets the environment override the file, and flags override both', () => {
    const cfg = loadGatewayConfig({
      file: file('env.yaml', minimal),
      env: {
        SLUICE__valkey__client: 'iovalkey',
        SLUICE__listen__port: '9000',
        SLUICE_ADMIN_TOKEN: 'from-env-0123456789',
      },
      overrides: { 'listen.port': 9100 },
    });
    assert.equal(cfg.valkey.client, 'iovalkey');
    assert.equal(cfg.listen.port, 9100);
    assert.equal(cfg.admin.token, 'from-env-0123456789');
  });

  it('names every bad key and the value it got', () => {
    const bad = file('bad.yaml', minimal + 'listen:\n  port: 70000\nvalkey:\n  client: redis-py\n');
    assert.throws(
      () => loadGatewayConfig({ file: bad, env: {} }),
      (err: Error) => {
        assert.ok(err instanceof ConfigError);
        assert.match(err.message, /listen\.port: .*\(got 70000\)/);
        assert.match(err.message, /valkey\.client: .*\(got "redis-py"\)/);
        return true;
      },
    );
  });

  it('checks references between settings once each setting is valid', () => {
    const f = file(
      'tier.yaml',
      minimal + 'quotas:\n  defaultTier: gold\n  apiKeys:\n    k1: platinum\n',
    );
    assert.throws(
      () => loadGatewayConfig({ file: f, env: {} }),
      (err: Error) => {
        assert.match(
          err.message,
          /quotas\.defaultTier: names a tier that is not defined \(tiers: default\)/,
        );
        // The API key itself is a secret: the entry is named by its position.
        assert.match(err.message, /quotas\.apiKeys\.<key #1>: tier "platinum" is not defined/);
        return true;
      },
    );
  });

  it('requires an admin token and at least one upstream', () => {
    assert.throws(() => loadGatewayConfig({ env: {} }), /admin: .*\n.*upstreams/s);
    assert.throws(
      () =>
        loadGatewayConfig({
          file: file('short.yaml', minimal.replace('0123456789abcdef', 'short')),
          env: {},
        }),
      /admin\.token: the admin token must have at least 16 characters/,
    );
  });

  it('refuses pubkey identities without signature verification, in either spelling', () => {
    for (const nostr of ['verify: never', 'verifySignatures: false']) {
      const f = file('pk.yaml', minimal + `nostr:\n  ${nostr}\n`);
      assert.throws(
        () => loadGatewayConfig({ file: f, env: {} }),
        /identity\.order: the pubkey identity needs signatures verified/,
        nostr,
      );
    }
  });

  it('verifies only where needed by default; the older boolean still means always/never', () => {
    const load = (extra: string) =>
      loadGatewayConfig({ file: file('v.yaml', minimal + extra), env: {} }).nostr.verify;
    assert.equal(load(''), 'auto');
    assert.equal(load('nostr:\n  verify: always\n'), 'always');
    // The relay's OK vouches for the author: allowed with the pubkey identity (the default order).
    assert.equal(load('nostr:\n  verify: relay\n'), 'relay');
    assert.throws(() => load('nostr:\n  verify: never\n'), /auto, always or relay/);
    assert.equal(load('nostr:\n  verifySignatures: true\n'), 'always');
    assert.equal(
      load('identity:\n  order: [apiKey, ip]\nnostr:\n  verifySignatures: false\n'),
      'never',
    );
    assert.throws(() => load('nostr:\n  verify: sometimes\n'), /nostr\.verify/);
    assert.throws(
      () => load('nostr:\n  verify: auto\n  verifySignatures: true\n'),
      /nostr\.verifySignatures: contradicts verify: auto/,
    );
  });

  it('reports unreadable and unparsable files clearly', () => {
    assert.throws(
      () => loadGatewayConfig({ file: path.join(dir, 'missing.yaml'), env: {} }),
      /cannot read config file .*missing\.yaml/,
    );
    assert.throws(
      () => loadGatewayConfig({ file: file('broken.yaml', 'listen: [\n'), env: {} }),
      /not valid YAML or JSON/,
    );
    assert.throws(
      () => loadGatewayConfig({ file: file('list.yaml', '- 1\n'), env: {} }),
      /mapping of settings/,
    );
  });

  it('rejects duplicate node ids and upstream URLs that are not http(s)', () => {
    const dup = file('dup.yaml', minimal + '  - id: relay-a\n    url: http://127.0.0.1:7002\n');
    assert.throws(
      () => loadGatewayConfig({ file: dup, env: {} }),
      /node id "relay-a" appears twice/,
    );
    const ftp = file('ftp.yaml', minimal.replace('http://127.0.0.1:7001', 'ftp://x'));
    assert.throws(() => loadGatewayConfig({ file: ftp, env: {} }), /upstreams\.0\.url/);
  });
});
