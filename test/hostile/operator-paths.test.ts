/**
 * Attack: reach the reference relay's operator endpoints through the gateway. The relay used
 * to trust its socket address for /admin/spike and /admin/drain, and every request the gateway
 * forwards comes from loopback, so `POST /admin/drain` through the gateway changed the relay.
 * Now the relay wants its own token (and without one has no such endpoints), and the gateway
 * denies the operator paths (`quotas.denyPaths`: /admin, /stats, /metrics) with a 404, however
 * the path is spelled, without charging or forwarding.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import { RelayOptionsError, toConfig } from '../../src/cli/relay.js';
import { request, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { RELAY_ADMIN_TOKEN, relayAdminHeaders, startRelay } from '../helpers/processes.js';
import { relayFlags } from '../helpers/relay-flags.js';
import type { RelayProcess } from '../helpers/processes.js';
import { rawRequest } from '../helpers/raw-http.js';

const DRAIN = 1024 * 1024;
const WRITE_LIMIT = 3;

async function drainRate(relay: RelayProcess): Promise<number> {
  const res = await request(`${relay.url}/stats`);
  assert.equal(res.status, 200, res.body);
  return (JSON.parse(res.body) as { drainRateBytesPerSec: number }).drainRateBytesPerSec;
}

function postDrain(target: string, headers = ''): string {
  const body = JSON.stringify({ bytesPerSec: 0 });
  return (
    `POST ${target} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${headers}` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  );
}

function signedEvent(): string {
  return JSON.stringify(
    finalizeEvent(
      { kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content: 'after' },
      generateSecretKey(),
    ),
  );
}

describe("the reference relay's admin endpoints", { timeout: 60_000 }, () => {
  let guarded: RelayProcess;
  let disabled: RelayProcess;

  before(async () => {
    [guarded, disabled] = await Promise.all([
      startRelay({ nodeId: 'guarded', drainBytesPerSec: DRAIN }),
      startRelay({ nodeId: 'disabled', drainBytesPerSec: DRAIN, adminToken: null }),
    ]);
  });

  after(async () => {
    await Promise.allSettled([guarded?.stop(), disabled?.stop()]);
  });

  it('want the token, even from loopback', async () => {
    for (const headers of ['', 'Authorization: Bearer wrong-token-0123456789\r\n']) {
      for (const path of ['/admin/drain', '/admin/spike']) {
        const res = await rawRequest(guarded.url, postDrain(path, headers));
        assert.equal(res.status, 401, `${path} ${headers}: ${res.body}`);
      }
    }
    assert.equal(await drainRate(guarded), DRAIN);
    const res = await request(`${guarded.url}/admin/drain`, {
      method: 'POST',
      headers: relayAdminHeaders(),
      body: JSON.stringify({ bytesPerSec: 2 * DRAIN }),
    });
    assert.equal(res.status, 200, res.body);
    assert.equal(await drainRate(guarded), 2 * DRAIN);
  });

  it('do not exist without a configured token', async () => {
    for (const path of ['/admin/drain', '/admin/spike']) {
      const res = await rawRequest(
        disabled.url,
        postDrain(path, `Authorization: Bearer ${RELAY_ADMIN_TOKEN}\r\n`),
      );
      assert.equal(res.status, 404, `${path}: ${res.body}`);
    }
    assert.equal(await drainRate(disabled), DRAIN);
  });

  it('take a token of at least 16 characters; an empty one disables them', () => {
    const flags = relayFlags({ maxEventBytes: 64 * 1024 });
    assert.throws(() => toConfig({ ...flags, adminToken: 'short' }), RelayOptionsError);
    assert.equal(toConfig({ ...flags, adminToken: '' }).adminToken, undefined);
    assert.equal(
      toConfig({ ...flags, adminToken: RELAY_ADMIN_TOKEN }).adminToken,
      RELAY_ADMIN_TOKEN,
    );
  });
});

describe('operator paths through the gateway', { timeout: 60_000 }, () => {
  let relay: RelayProcess;
  let gw: GatewayUnderTest;

  before(async () => {
    relay = await startRelay({ nodeId: 'relay-a', drainBytesPerSec: DRAIN });
    gw = await startGateway('iovalkey', 'standalone', [{ id: 'relay-a', url: relay.url }], {
      identity: { order: ['ip'] },
      quotas: {
        keyPrefix: `operator${Date.now().toString(36)}`,
        tiers: { default: { write: { points: WRITE_LIMIT, windowSec: 60 } } },
      },
    });
  });

  after(async () => {
    await gw?.proc.stop();
    await relay?.stop();
  });

  it('answers POST /admin/drain 404 however spelled, and the relay is unchanged', async () => {
    const spellings = [
      '/admin/drain',
      '/%61dmin/drain',
      '/ADMIN/drain',
      '/Admin/Drain',
      '/admin/drain/',
      '/admin//drain',
      '/./admin/drain',
      '/events/../admin/drain',
      '/events/%2e%2e/admin/drain',
      '/admin%2Fdrain',
      'http://x/admin/drain',
      '/admin/spike',
    ];
    const authorization = `Authorization: Bearer ${RELAY_ADMIN_TOKEN}\r\n`;
    for (const target of spellings) {
      // Even a client that knows the relay's token: the gateway does not forward these.
      for (const headers of ['', authorization]) {
        const res = await rawRequest(gw.url, postDrain(target, headers), '127.0.0.2');
        assert.equal(res.status, 404, `${target}: ${res.status} ${res.body.slice(0, 200)}`);
      }
    }
    assert.equal(await drainRate(relay), DRAIN, 'the relay kept its drain rate');
  });

  it('answers the relay’s /stats and /metrics 404', async () => {
    for (const target of ['/stats', '/metrics', '/%73tats', '/METRICS', 'http://x/stats']) {
      const res = await rawRequest(
        gw.url,
        `GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
        '127.0.0.3',
      );
      assert.equal(res.status, 404, `${target}: ${res.status} ${res.body.slice(0, 200)}`);
    }
  });

  it('charges nothing for a denied request', async () => {
    const from = '127.0.0.4';
    for (let i = 0; i < WRITE_LIMIT * 3; i++) {
      const res = await rawRequest(gw.url, postDrain('/%61dmin/drain'), from);
      assert.equal(res.status, 404);
    }
    const write = await request(`${gw.url}/events`, { method: 'POST', body: signedEvent(), from });
    assert.equal(write.status, 200, `the address still has its whole quota: ${write.body}`);
  });
});
