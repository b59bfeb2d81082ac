/**
 * Attack: one address spreads itself over the workers of a multi-worker gateway. Each worker
 * counts connections, frames and failed verifications per address in its own memory; under
 * node's round-robin an address got `workers x` every such limit. The primary now hands all
 * connections of one address to one worker (sticky-dispatch.ts), so each limit holds per
 * gateway: exactly at the limit, over raw sockets and over several connections. Behind a
 * trusted proxy the client a WebSocket upgrade is forwarded for is the one hashed.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { ClientAddress } from '../../src/gateway/client-address.js';
import { dispatchKey, slotFor } from '../../src/gateway/sticky-dispatch.js';
import { NostrClient, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { startRelay } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';
import { metricSum, metricsOf, rawUpgrade, waitFor } from '../helpers/raw-socket.js';
import type { UpgradeAnswer } from '../helpers/raw-socket.js';

const MAX_PER_ADDRESS = 4;
const FRAMES_PER_SEC = 10;
const HEADERS_TIMEOUT_MS = 600;

describe('per-address limits with two workers', { timeout: 120_000 }, () => {
  let relay: RelayProcess;
  let gw: GatewayUnderTest;
  const held: UpgradeAnswer[] = [];
  const clients: NostrClient[] = [];

  before(async () => {
    relay = await startRelay({ nodeId: 'relay-a' });
    gw = await startGateway('iovalkey', 'standalone', [{ id: 'relay-a', url: relay.url }], {
      workers: 2,
      quotas: { keyPrefix: `wlimits${Date.now().toString(36)}` },
      limits: {
        maxConnectionsPerAddress: MAX_PER_ADDRESS,
        framesPerSecPerAddress: FRAMES_PER_SEC,
        headersTimeoutMs: HEADERS_TIMEOUT_MS,
      },
    });
  });

  after(async () => {
    for (const answer of held) answer.socket.destroy();
    for (const c of clients) c.close();
    await gw?.proc.stop();
    await relay?.stop();
  });

  it('refuses the connection past maxConnectionsPerAddress, and only that address', async () => {
    const from = '127.0.21.2';
    for (let i = 0; i < MAX_PER_ADDRESS; i++) {
      const answer = await rawUpgrade(gw.url, { from });
      held.push(answer);
      assert.equal(answer.status, 101, `connection ${i + 1} of ${MAX_PER_ADDRESS}`);
    }
    for (let i = 0; i < 10; i++) {
      const refused = await rawUpgrade(gw.url, { from });
      refused.socket.destroy();
      assert.equal(refused.status, 429, `connection ${MAX_PER_ADDRESS + i + 1} is refused`);
    }
    const metrics = await metricsOf(gw.adminUrl);
    assert.equal(
      metricSum(metrics, 'sluice_websocket_upgrades_refused_total', { reason: 'per-address' }),
      10,
    );
    for (let i = 0; i < MAX_PER_ADDRESS; i++) {
      const other = await rawUpgrade(gw.url, { from: '127.0.21.3' });
      held.push(other);
      assert.equal(other.status, 101, 'another address connects as before');
    }
  });

  it('counts frames per second of one address over its connections in one process', async () => {
    const from = '127.0.21.4';
    const flooders = await Promise.all([0, 1].map(() => NostrClient.connect(gw.url, from)));
    clients.push(...flooders);
    const sent = 4 * FRAMES_PER_SEC;
    // One burst, well inside the one-second window its first frame opens.
    for (let i = 0; i < sent; i++) flooders[i % 2]!.send(['CLOSE', `s${i}`]);
    // Admitted CLOSE frames are forwarded silently: refusals are the only answers.
    const refusals = () => flooders.flatMap((f) => f.received).filter((m) => m[0] === 'NOTICE');
    await waitFor(
      `${sent - FRAMES_PER_SEC} refusals`,
      () => refusals().length >= sent - FRAMES_PER_SEC,
    );
    assert.equal(refusals().length, sent - FRAMES_PER_SEC, 'exactly the rate is admitted');

    const other = await NostrClient.connect(gw.url, '127.0.21.5');
    clients.push(other);
    other.send(['REQ', 'mine', { limit: 1 }]);
    await other.until((m) => m.some((x) => x[0] === 'EOSE' && x[1] === 'mine'));
    assert.ok(!other.received.some((m) => m[0] === 'NOTICE'), 'another address is not refused');
  });

  it('still answers slow request headers with 408 in a worker', async () => {
    const socket = net.connect({
      host: new URL(gw.url).hostname,
      port: Number(new URL(gw.url).port),
    });
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.on('error', () => undefined);
    socket.write('GET / HTTP/1.1\r\nHost: x\r\n');
    await waitFor(
      'the slow client to be cut',
      () => socket.destroyed || received.length > 0,
      10_000,
    );
    await closed;
    assert.match(received, /^HTTP\/1\.1 408/);
  });
});

describe('per-address limits with two workers behind a trusted proxy', { timeout: 120_000 }, () => {
  let relay: RelayProcess;
  let gw: GatewayUnderTest;
  const held: UpgradeAnswer[] = [];
  const client = '198.51.100.7';
  // Two proxies whose own addresses the primary would hand to different workers.
  const trusted = new ClientAddress(['127.0.0.0/8'], {});
  const proxies = ['127.0.22.2', '127.0.22.3', '127.0.22.4', '127.0.22.5', '127.0.22.6'];
  const bySlot = (p: string) => slotFor(dispatchKey(trusted, p), [0, 1]);
  const proxyA = proxies.find((p) => bySlot(p) === 0)!;
  const proxyB = proxies.find((p) => bySlot(p) === 1)!;

  before(async () => {
    assert.ok(proxyA && proxyB, 'two proxy addresses hashed to different workers');
    relay = await startRelay({ nodeId: 'relay-a' });
    gw = await startGateway('iovalkey', 'standalone', [{ id: 'relay-a', url: relay.url }], {
      workers: 2,
      trustedProxies: ['127.0.0.0/8'],
      quotas: { keyPrefix: `wproxy${Date.now().toString(36)}` },
      limits: { maxConnectionsPerAddress: MAX_PER_ADDRESS },
    });
  });

  after(async () => {
    for (const answer of held) answer.socket.destroy();
    await gw?.proc.stop();
    await relay?.stop();
  });

  it('hashes the client a WebSocket upgrade is forwarded for, not the proxy', async () => {
    const headers = { 'x-forwarded-for': client };
    for (let i = 0; i < MAX_PER_ADDRESS; i++) {
      const from = i % 2 === 0 ? proxyA : proxyB;
      const answer = await rawUpgrade(gw.url, { from, headers });
      held.push(answer);
      assert.equal(answer.status, 101, `connection ${i + 1} of ${MAX_PER_ADDRESS}`);
    }
    for (const from of [proxyA, proxyB]) {
      const refused = await rawUpgrade(gw.url, { from, headers });
      refused.socket.destroy();
      assert.equal(refused.status, 429, `past the limit through ${from}`);
    }
    const other = await rawUpgrade(gw.url, {
      from: proxyB,
      headers: { 'x-forwarded-for': '198.51.100.8' },
    });
    held.push(other);
    assert.equal(other.status, 101, 'another client through the same proxy connects');
  });
});
