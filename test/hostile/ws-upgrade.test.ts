/**
 * Attacks on the WebSocket upgrade path, sent by hand over raw sockets:
 * - an absolute-form request target (`GET http://x/`) made the gateway exit;
 * - every upgrade the WebSocket library refused (no Sec-WebSocket-Key, a bad version, a
 *   wrong method) left one relay WebSocket open;
 * - an upgrade to a path the relay answers 404 counted against the relay's health, so a
 *   handful of them took a healthy relay out of rotation and every client got 503.
 * Each is answered, the relay's connections return to their baseline, the relay stays in
 * rotation, and nothing reaches the last-resort handler.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { NostrClient, request, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { isAlive } from '../helpers/cli.js';
import { startRelay } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';
import {
  WS_KEY,
  inBatches,
  metricSum,
  metricsOf,
  rawUpgrade,
  relayConnections,
  waitFor,
} from '../helpers/raw-socket.js';

describe('WebSocket upgrades a client spells badly', { timeout: 120_000 }, () => {
  let relay: RelayProcess;
  let gw: GatewayUnderTest;

  before(async () => {
    relay = await startRelay({ nodeId: 'relay-a' });
    gw = await startGateway('ioredis', 'standalone', [{ id: 'relay-a', url: relay.url }], {
      quotas: { keyPrefix: `upgrade${Date.now().toString(36)}` },
      // Rare health checks: a relay wrongly taken out of rotation stays out while we look.
      healthCheck: { intervalMs: 60_000 },
    });
  });

  after(async () => {
    await gw?.proc.stop();
    await relay?.stop();
  });

  async function assertGatewayWhole(): Promise<void> {
    assert.ok(isAlive(gw.proc.pid), 'the gateway process is alive');
    const metrics = await metricsOf(gw.adminUrl);
    assert.equal(metricSum(metrics, 'sluice_internal_errors_total'), 0, 'no internal errors');
    const client = await NostrClient.connect(gw.url, '127.0.16.9');
    try {
      client.send(['REQ', 'alive', { limit: 1 }]);
      await client.until((m) => m.some((x) => x[0] === 'EOSE' && x[1] === 'alive'));
    } finally {
      client.close();
    }
  }

  it('absolute-form targets are served as their path; unusable ones answered 400', async () => {
    const absolute = await rawUpgrade(gw.url, { target: 'http://x/' });
    assert.equal(absolute.status, 101, 'an absolute-form target upgrades to the relay root');
    absolute.socket.destroy();
    const elsewhere = await rawUpgrade(gw.url, { target: 'http://x/elsewhere' });
    assert.equal(elsewhere.status, 404, 'and its path is the one the relay judges');
    for (const target of ['/%zz', '/%00', '/a%2F..%2F%ff']) {
      const bad = await rawUpgrade(gw.url, { target });
      assert.equal(bad.status, 400, `target ${target}`);
      assert.match(bad.body, /request target/);
    }
    await assertGatewayWhole();
  });

  it("denies upgrades to the relay's operator paths whatever the spelling", async () => {
    for (const target of ['/admin/drain', '/%61dmin/drain', 'http://x/ADMIN/', '/x/../stats']) {
      const denied = await rawUpgrade(gw.url, { target });
      assert.equal(denied.status, 404, `target ${target}`);
    }
    assert.equal(await relayConnections(relay.url), 0, 'no relay socket was opened');
    await assertGatewayWhole();
  });

  it('refuses handshakes ws would refuse before opening a relay socket; none leaks', async () => {
    // The suite holds no connection between tests: once earlier ones have closed, none is open.
    const idle = async () => (await relayConnections(relay.url)) === 0;
    await waitFor('the relay to have no connection', idle);
    const spoilt: { what: string; method?: string; headers: Record<string, string | undefined> }[] =
      [
        { what: 'no key', headers: { 'Sec-WebSocket-Key': undefined } },
        { what: 'bad key', headers: { 'Sec-WebSocket-Key': 'short' } },
        { what: 'no version', headers: { 'Sec-WebSocket-Version': undefined } },
        { what: 'bad version', headers: { 'Sec-WebSocket-Version': '12' } },
        { what: 'other protocol', headers: { Upgrade: 'h2c' } },
        { what: 'bad subprotocol', headers: { 'Sec-WebSocket-Protocol': 'a,,a' } },
        { what: 'POST', method: 'POST', headers: { 'Content-Length': '0' } },
      ];
    const attempts = Array.from({ length: 280 }, (_, i) => spoilt[i % spoilt.length]!);
    const answers = await inBatches(attempts, 16, (a) =>
      rawUpgrade(gw.url, { method: a.method, headers: a.headers, from: '127.0.16.2' }),
    );
    answers.forEach((answer, i) => {
      const { what, method } = attempts[i]!;
      assert.equal(answer.status, method === 'POST' ? 405 : 400, what);
      assert.match(answer.headers['content-type'] ?? '', /problem\+json/);
    });
    assert.equal(answers[3]!.headers['sec-websocket-version'], '13, 8');

    // Clients that go away while their relay socket is opening take it with them.
    const { hostname, port } = new URL(gw.url);
    for (let i = 0; i < 20; i++) {
      const socket = net.connect({ host: hostname, port: Number(port) });
      socket.on('error', () => undefined);
      socket.end(
        `GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          `Sec-WebSocket-Key: ${WS_KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
      );
    }
    await waitFor('the relay to have no connection again', idle, 15_000);
    const metrics = await metricsOf(gw.adminUrl);
    assert.ok(
      metricSum(metrics, 'sluice_websocket_upgrades_refused_total', { reason: 'bad-request' }) >=
        attempts.length,
    );
    await assertGatewayWhole();
  });

  it("passes the relay's answer on without counting it against the relay", async () => {
    const answers = await inBatches(Array.from({ length: 40 }), 8, (_, i) =>
      rawUpgrade(gw.url, { target: `/not-a-relay-path/${i}`, from: '127.0.16.3' }),
    );
    for (const answer of answers) {
      assert.equal(answer.status, 404);
      assert.match(answer.body, /answered the upgrade with 404/);
    }
    const ready = await request(`${gw.adminUrl}/readyz`);
    assert.equal(ready.status, 200, `readyz: ${ready.body}`);
    const metrics = await metricsOf(gw.adminUrl);
    assert.equal(metricSum(metrics, 'sluice_upstream_up', { node: 'relay-a' }), 1);
    assert.equal(metricSum(metrics, 'sluice_upstream_errors_total'), 0);
    // Other clients are served: a WebSocket and an HTTP request.
    await assertGatewayWhole();
    const http = await request(`${gw.url}/`, { from: '127.0.16.4' });
    assert.equal(http.status, 200);
  });
});
