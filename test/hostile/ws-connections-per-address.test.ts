/**
 * Attack: one address opens WebSocket after WebSocket until the gateway (and the relay behind
 * it) holds thousands of its sockets. Connections per source address are bounded
 * (`limits.maxConnectionsPerAddress`): past it the upgrade is answered 429 with Retry-After
 * before any relay socket is opened; other addresses connect as before, and a slot comes back
 * when its connection closes or its handshake fails.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { NostrClient, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { isAlive } from '../helpers/cli.js';
import { startRelay } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';
import {
  metricSum,
  metricsOf,
  rawUpgrade,
  relayConnections,
  waitFor,
} from '../helpers/raw-socket.js';

const MAX_PER_ADDRESS = 4;

describe('WebSocket connections per source address', { timeout: 60_000 }, () => {
  let relay: RelayProcess;
  let gw: GatewayUnderTest;
  const clients: NostrClient[] = [];

  before(async () => {
    relay = await startRelay({ nodeId: 'relay-a' });
    gw = await startGateway('ioredis', 'standalone', [{ id: 'relay-a', url: relay.url }], {
      quotas: { keyPrefix: `peraddr${Date.now().toString(36)}` },
      limits: { maxConnectionsPerAddress: MAX_PER_ADDRESS },
    });
  });

  after(async () => {
    for (const c of clients) c.close();
    await gw?.proc.stop();
    await relay?.stop();
  });

  it('answers 429 with Retry-After past the bound, and only to that address', async () => {
    const from = '127.0.17.2';
    for (let i = 0; i < MAX_PER_ADDRESS; i++) clients.push(await NostrClient.connect(gw.url, from));
    const relayHeld = await relayConnections(relay.url);

    for (let i = 0; i < 50; i++) {
      const refused = await rawUpgrade(gw.url, { from });
      assert.equal(refused.status, 429);
      assert.ok(Number(refused.headers['retry-after']) >= 1, 'Retry-After');
      assert.match(refused.body, /connections per client address/);
    }
    assert.equal(await relayConnections(relay.url), relayHeld, 'no relay socket for a refusal');
    const metrics = await metricsOf(gw.adminUrl);
    assert.equal(
      metricSum(metrics, 'sluice_websocket_upgrades_refused_total', { reason: 'per-address' }),
      50,
    );

    const other = await NostrClient.connect(gw.url, '127.0.17.3');
    clients.push(other);
    other.send(['REQ', 'other', { limit: 1 }]);
    await other.until((m) => m.some((x) => x[0] === 'EOSE' && x[1] === 'other'));

    // A closed connection gives its slot back.
    clients.shift()!.close();
    await waitFor('a slot to come back', async () => {
      const answer = await rawUpgrade(gw.url, { from });
      answer.socket.destroy();
      return answer.status === 101;
    });
  });

  it('gives the slot back when the handshake fails', async () => {
    const from = '127.0.17.4';
    for (let i = 0; i < MAX_PER_ADDRESS * 5; i++) {
      const answer = await rawUpgrade(gw.url, { target: `/no-such-path/${i}`, from });
      assert.equal(answer.status, 404, 'the relay refuses the path; the address is not full');
    }
    const answer = await rawUpgrade(gw.url, { from });
    assert.equal(answer.status, 101);
    answer.socket.destroy();
    assert.ok(isAlive(gw.proc.pid));
    const metrics = await metricsOf(gw.adminUrl);
    assert.equal(metricSum(metrics, 'sluice_internal_errors_total'), 0);
  });
});
