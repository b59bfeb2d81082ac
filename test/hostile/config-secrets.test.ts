/**
 * Hole: configuration errors quoted the secrets they concerned (`quotas.apiKeys.<the key>`,
 * `(got "<the admin token>")`, the lines of a YAML file around a parse error), and errors and
 * logs end up where many can read them. Errors now name the setting, never a secret; and a
 * gateway that keeps the public default identity salt says so once, at start.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ConfigError, loadGatewayConfig, validateGatewayConfig } from '../../src/config/load.js';
import { ADMIN_TOKEN, admin, request, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { startRelay } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';

const API_KEY = 'plain-api-key-a81f0c';
const SALT = 'operator-salt-73be91';
const base = {
  admin: { token: ADMIN_TOKEN },
  upstreams: [{ id: 'relay-a', url: 'http://127.0.0.1:7001' }],
};

function refusal(input: unknown): string {
  try {
    validateGatewayConfig(input);
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    return err.message;
  }
  assert.fail('the configuration was accepted');
}

function assertNoSecret(text: string, ...secrets: string[]): void {
  for (const secret of secrets) {
    assert.ok(!text.includes(secret), `"${secret}" appears in: ${text}`);
  }
}

const SALT_WARNING = /identity\.keySalt is the public default/g;

describe('secrets in configuration errors', { timeout: 30_000 }, () => {
  it('names an API key with a tier that does not exist by its position', () => {
    const message = refusal({
      ...base,
      quotas: { apiKeys: { 'other-key-0000': 'default', [API_KEY]: 'gold' } },
    });
    assert.match(message, /quotas\.apiKeys\.<key #2>: tier "gold" is not defined/);
    assertNoSecret(message, API_KEY);
  });

  it('shows keys given as their sha256, which are not secret', () => {
    const hashed = `sha256:${'ab'.repeat(32)}`;
    const message = refusal({ ...base, quotas: { apiKeys: { [hashed]: 'gold' } } });
    assert.match(message, new RegExp(`quotas\\.apiKeys\\.${hashed}: tier "gold"`));
  });

  it('never shows the value of the admin token, the salt or the allow-list', () => {
    const short = 'tok-7c1e';
    const cases: [unknown, RegExp, string][] = [
      [{ ...base, admin: { token: short } }, /admin\.token: .*16 characters/, short],
      [{ ...base, admin: 'admin-token-as-a-string-5d2c' }, /admin: /, 'admin-token-as-a'],
      [{ ...base, identity: { keySalt: 4711 } }, /identity\.keySalt: /, '4711'],
      [{ ...base, quotas: { allowList: [API_KEY, 12345] } }, /quotas\.allowList\.1: /, '12345'],
      [{ ...base, quotas: { apiKeys: { [API_KEY]: 7 } } }, /quotas\.apiKeys\.<key #1>: /, API_KEY],
    ];
    for (const [input, expected, secret] of cases) {
      const message = refusal(input);
      assert.match(message, expected);
      assertNoSecret(message, secret);
    }
  });

  it('still shows the value of settings that are not secret', () => {
    assert.match(refusal({ ...base, listen: { port: 70000 } }), /listen\.port: .*\(got 70000\)/);
  });

  it('keeps secrets from the environment out of the message too', () => {
    const message = (() => {
      try {
        loadGatewayConfig({
          env: {
            SLUICE_ADMIN_TOKEN: ADMIN_TOKEN,
            SLUICE__upstreams: JSON.stringify(base.upstreams),
            [`SLUICE__quotas__apiKeys__${API_KEY}`]: 'gold',
          },
        });
      } catch (err) {
        return (err as Error).message;
      }
      assert.fail('accepted');
    })();
    assert.match(message, /quotas\.apiKeys\.<key #1>: tier "gold" is not defined/);
    assertNoSecret(message, API_KEY, ADMIN_TOKEN);
  });

  it('does not quote the lines of a file it cannot parse', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'sluice-secrets-'));
    const file = path.join(dir, 'broken.yaml');
    writeFileSync(
      file,
      `admin:\n  token: "${ADMIN_TOKEN}\nquotas:\n  apiKeys: { ${API_KEY}: [ }\n`,
    );
    assert.throws(
      () => loadGatewayConfig({ file, env: {} }),
      (err: Error) => {
        assert.match(err.message, /not valid YAML or JSON: .*line \d+/);
        assertNoSecret(err.message, ADMIN_TOKEN, API_KEY);
        return true;
      },
    );
  });
});

describe('secrets in a running gateway’s output', { timeout: 60_000 }, () => {
  let relay: RelayProcess;
  let salted: GatewayUnderTest;
  let unsalted: GatewayUnderTest;

  before(async () => {
    relay = await startRelay({ nodeId: 'relay-a' });
    const upstreams = [{ id: 'relay-a', url: relay.url }];
    const quotas = {
      keyPrefix: `secrets${Date.now().toString(36)}`,
      apiKeys: { [API_KEY]: 'default' },
    };
    const logging = { level: 'debug', requests: true };
    [salted, unsalted] = await Promise.all([
      startGateway('iovalkey', 'standalone', upstreams, {
        identity: { keySalt: SALT },
        quotas,
        logging,
      }),
      startGateway('iovalkey', 'standalone', upstreams, { quotas, logging }),
    ]);
  });

  after(async () => {
    await Promise.allSettled([salted?.proc.stop(), unsalted?.proc.stop()]);
    await relay?.stop();
  });

  async function untilOutput(gw: GatewayUnderTest, pattern: RegExp, timeoutMs = 10_000) {
    const deadline = Date.now() + timeoutMs;
    while (!pattern.test(gw.proc.output())) {
      if (Date.now() > deadline) assert.fail(`no ${pattern} in: ${gw.proc.output().slice(-2000)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  it('warns once, at start, when the default salt is in use', async () => {
    assert.equal(unsalted.proc.output().match(SALT_WARNING)?.length, 1, unsalted.proc.output());
    assert.equal(salted.proc.output().match(SALT_WARNING), null, 'not with a salt of its own');
    // A reload does not repeat it.
    process.kill(unsalted.proc.pid, 'SIGHUP');
    await untilOutput(unsalted, /configuration reloaded/);
    assert.equal(unsalted.proc.output().match(SALT_WARNING)?.length, 1);
  });

  it('logs no API key, token or salt, not even when a reload is refused', async () => {
    for (const gw of [salted, unsalted]) {
      await request(`${gw.url}/events?limit=1`, { headers: { 'x-api-key': API_KEY } });
      await admin(gw, 'GET', `/admin/clients/key:${API_KEY}`);
      await admin(gw, 'GET', '/admin/flow-control', undefined, 'a-wrong-token-123456');
    }
    const config = JSON.parse(readFileSync(salted.configFile, 'utf8')) as {
      quotas: Record<string, unknown>;
    };
    config.quotas.apiKeys = { [API_KEY]: 'gold' };
    writeFileSync(salted.configFile, JSON.stringify(config));
    process.kill(salted.proc.pid, 'SIGHUP');
    await untilOutput(salted, /configuration reload rejected/);
    assert.match(salted.proc.output(), /quotas\.apiKeys\.<key #1>/);
    for (const gw of [salted, unsalted])
      assertNoSecret(gw.proc.output(), API_KEY, ADMIN_TOKEN, SALT);
  });
});
