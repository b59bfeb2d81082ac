import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError, loadGatewayConfig, validateGatewayConfig } from '../../../src/config/load.js';
import { GatewayConfigSchema } from '../../../src/config/schema.js';
import { closestKey, editDistance, objectsOf } from '../../../src/config/unknown-keys.js';

const dir = mkdtempSync(path.join(tmpdir(), 'sluice-config-'));
function file(name: string, text: string): string {
  const p = path.join(dir, name);
  writeFileSync(p, text);
  return p;
}
const minimal =
  'admin:\n  token: 0123456789abcdef\nupstreams:\n  - id: relay-a\n    url: http://127.0.0.1:7001\n';

describe('gateway configuration', { timeout: 30_000 }, () => {
  it('fills defaults: loopback, iovalkey on standalone, sticky routing, quotas that insure', () => {
    const cfg = loadGatewayConfig({ file: file('min.yaml', minimal), env: {} });
    assert.equal(cfg.listen.host, '127.0.0.1');
    assert.equal(cfg.admin.host, '127.0.0.1');
    assert.equal(cfg.valkey.client, 'iovalkey');
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

  it('drains connections off a node in trouble only with headroom routing, and off by default', () => {
    const cfg = loadGatewayConfig({ file: file('drain0.yaml', minimal), env: {} });
    assert.equal(cfg.pressure.drain.enabled, false);
    assert.equal(cfg.pressure.drain.sharePerSec, 0.05);
    const on = 'pressure:\n  drain: { enabled: true }\n';
    assert.throws(
      () => loadGatewayConfig({ file: file('drain1.yaml', minimal + on), env: {} }),
      /pressure\.drain\.enabled: needs routing: headroom \(with sticky routing/,
    );
    const ok = loadGatewayConfig({
      file: file('drain2.yaml', minimal + on + 'routing: headroom\n'),
      env: {},
    });
    assert.equal(ok.routing, 'headroom');
    assert.equal(ok.pressure.drain.enabled, true);
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

/** The message a configuration is refused with. */
function refusal(load: () => unknown): string {
  try {
    load();
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    return err.message;
  }
  assert.fail('the configuration was accepted');
}

describe('unknown configuration keys', { timeout: 60_000 }, () => {
  it('every object of the schema refuses keys it does not know', () => {
    const loose = objectsOf(GatewayConfigSchema).filter((o) => !o.strict);
    assert.deepEqual(
      loose.map((o) => o.path || '(top level)'),
      [],
      'use z.strictObject for these sections',
    );
  });

  it('names a misspelt key by its full path, with the key probably meant', () => {
    const message = refusal(() =>
      loadGatewayConfig({
        file: file('typo.yaml', minimal + 'quotas:\n  inMemoryBlok: false\n'),
        env: {},
      }),
    );
    assert.match(message, /unknown key quotas\.inMemoryBlok: did you mean inMemoryBlock\?/);
  });

  it('finds unknown keys at every depth: top level, maps of tiers, lists of routes', () => {
    const message = refusal(() =>
      validateGatewayConfig({
        admin: { token: '0123456789abcdef' },
        upstreams: [{ id: 'relay-a', url: 'http://127.0.0.1:7001', weight: 2 }],
        qutoas: {},
        quotas: {
          tiers: { default: { write: { points: 1, windowSec: 1, burst: 5 } } },
          routes: [{ path: '/x', class: 'write', costs: 3 }],
        },
      }),
    );
    assert.match(message, /unknown key qutoas: did you mean quotas\?/);
    assert.match(message, /unknown key upstreams\.0\.weight\n/);
    assert.match(message, /unknown key quotas\.tiers\.default\.write\.burst\n/);
    assert.match(message, /unknown key quotas\.routes\.0\.costs: did you mean cost\?/);
  });

  it('points a setting put in the wrong section to where it belongs', () => {
    const message = refusal(() =>
      loadGatewayConfig({
        file: file('place.yaml', minimal + 'quotas:\n  maxFrameBytes: 1\n'),
        env: {},
      }),
    );
    assert.match(
      message,
      /unknown key quotas\.maxFrameBytes: did you mean limits\.maxFrameBytes\?/,
    );
  });

  it('names the environment variable or flag that set an unknown key', () => {
    const message = refusal(() =>
      loadGatewayConfig({
        file: file('env-typo.yaml', minimal),
        env: { SLUICE__limits__maxFrameByte: '1024' },
        overrides: { 'pressure.enable': true },
      }),
    );
    assert.match(
      message,
      /unknown key limits\.maxFrameByte: did you mean maxFrameBytes\? \(from SLUICE__limits__maxFrameByte\)/,
    );
    assert.match(
      message,
      /unknown key pressure\.enable: did you mean enabled\? \(from --set pressure\.enable\)/,
    );
  });

  it('still accepts the deprecated nostr.verifySignatures', () => {
    const cfg = loadGatewayConfig({
      file: file('dep.yaml', minimal + 'nostr:\n  verifySignatures: true\n'),
      env: {},
    });
    assert.equal(cfg.nostr.verify, 'always');
  });

  it('suggests only keys within a slip of the one written', () => {
    assert.equal(editDistance('inMemoryBlok', 'inMemoryBlock'), 1);
    assert.equal(editDistance('prot', 'port'), 1, 'two neighbours swapped are one edit');
    assert.equal(closestKey('LISTEN', ['listen', 'admin']), 'listen', 'case does not count');
    assert.equal(closestKey('colour', ['mode', 'tiers']), undefined);
    assert.equal(closestKey('pots', ['points', 'port']), undefined, 'two edits in four letters');
    assert.equal(closestKey('windowSecs', ['points', 'windowSec']), 'windowSec');
  });
});
