/**
 * Attack: a WebSocket client that writes and never reads. Every small frame it sends is
 * answered by the gateway itself (a NOTICE), and the answers used to pile up in the gateway's
 * memory without limit (300k frames: +121 MiB). Bytes buffered towards a client are bounded:
 * past a high-water mark the gateway stops reading from it (its writes back up in the kernel),
 * and past `limits.maxBufferedBytesPerClient` it is closed (1008). Other clients are served.
 * The same holds for what the relay sends it: a subscription's events, which the gateway
 * holds to send together (turn-writes.ts), count towards the bound as they are held.
 */
import assert from 'node:assert/strict';
import type net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import { NostrClient, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { isAlive } from '../helpers/cli.js';
import { startRelay } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';
import {
  clientTextFrame,
  metricSum,
  metricsOf,
  rawUpgrade,
  rssBytes,
  waitFor,
} from '../helpers/raw-socket.js';

const MiB = 1024 * 1024;
/**
 * Without a bound the gateway kept every unread answer (about 0.45 KiB each: 600k frames grew
 * it by some 280 MiB). With it, the gateway still answers what the kernel's socket buffers
 * take (some MiB, tens of thousands of answers) before it sees the client fall behind, and the
 * garbage of that work grows V8's heap: 50-75 MiB (more on a busy machine), whatever the
 * flood's length.
 */
const RSS_GROWTH_BOUND = 128 * MiB;
/** 80 MiB of a relay's answers asked for: held past the high-water mark, they would show. */
const RELAY_ANSWERS_GROWTH_BOUND = 48 * MiB;
const FRAMES = 600_000;
const BATCH = 2000;
const FLOOD_MS = 20_000;

/**
 * Write FRAMES tiny malformed frames (each answered with a NOTICE) without ever reading, as
 * fast as the socket takes them; stop early when the gateway stops taking them (writes stall)
 * or the connection ends. Bounded in count and time.
 */
async function flood(socket: net.Socket): Promise<'sent' | 'stalled' | 'closed'> {
  let ended = false;
  socket.on('error', () => (ended = true));
  socket.on('close', () => (ended = true));
  const batch = Buffer.concat(Array.from({ length: BATCH }, () => clientTextFrame('x')));
  const deadline = Date.now() + FLOOD_MS;
  for (let sent = 0; sent < FRAMES; sent += BATCH) {
    if (ended) return 'closed';
    if (Date.now() > deadline) return 'stalled';
    if (!socket.write(batch)) {
      const drained = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), 3000);
        socket.once('drain', () => {
          clearTimeout(timer);
          resolve(true);
        });
      });
      if (!drained) return ended ? 'closed' : 'stalled';
    }
  }
  return 'sent';
}

/** Wait until the gateway has stopped answering frames (its frame counter is still). */
async function untilQuiet(gw: GatewayUnderTest): Promise<number> {
  let peakRss = rssBytes(gw.proc.pid);
  let last = -1;
  let stillSince = Date.now();
  await waitFor(
    'the gateway to stop handling frames',
    async () => {
      peakRss = Math.max(peakRss, rssBytes(gw.proc.pid));
      const frames = metricSum(await metricsOf(gw.adminUrl), 'sluice_frames_total');
      if (frames !== last) {
        last = frames;
        stillSince = Date.now();
      }
      return Date.now() - stillSince > 1500;
    },
    60_000,
  );
  return peakRss;
}

async function assertOthersServed(gw: GatewayUnderTest, from: string): Promise<void> {
  const other = await NostrClient.connect(gw.url, from);
  try {
    other.send(['REQ', 'other', { limit: 1 }]);
    await other.until((m) => m.some((x) => x[0] === 'EOSE' && x[1] === 'other'));
  } finally {
    other.close();
  }
  assert.ok(isAlive(gw.proc.pid), 'the gateway is alive');
  const metrics = await metricsOf(gw.adminUrl);
  assert.equal(metricSum(metrics, 'sluice_internal_errors_total'), 0, 'no internal errors');
}

describe('a client that writes and never reads', { timeout: 180_000 }, () => {
  let relay: RelayProcess;
  const gateways: GatewayUnderTest[] = [];
  const sockets: net.Socket[] = [];

  before(async () => {
    relay = await startRelay({ nodeId: 'relay-a' });
  });

  after(async () => {
    for (const s of sockets) s.destroy();
    for (const gw of gateways) await gw.proc.stop();
    await relay?.stop();
  });

  async function gateway(limits: Record<string, number> = {}): Promise<GatewayUnderTest> {
    const gw = await startGateway('ioredis', 'standalone', [{ id: 'relay-a', url: relay.url }], {
      quotas: { keyPrefix: `slowread${Date.now().toString(36)}` },
      limits,
    });
    gateways.push(gw);
    return gw;
  }

  it('is paused once its answers pass the high-water mark: gateway memory stays bounded', async () => {
    const gw = await gateway();
    const { socket, status } = await rawUpgrade(gw.url, { from: '127.0.18.2' });
    sockets.push(socket);
    assert.equal(status, 101);
    const before = rssBytes(gw.proc.pid);
    const outcome = await flood(socket);
    const peak = await untilQuiet(gw);
    const grew = peak - before;
    assert.ok(
      grew < RSS_GROWTH_BOUND,
      `gateway RSS grew by ${(grew / MiB).toFixed(1)} MiB (flood ${outcome})`,
    );
    const metrics = await metricsOf(gw.adminUrl);
    assert.ok(metricSum(metrics, 'sluice_slow_clients_total') >= 1, 'counted as a slow client');
    await assertOthersServed(gw, '127.0.18.3');
  });

  it('is closed once its answers pass maxBufferedBytesPerClient', async () => {
    // A bound this small is passed by the answers to frames already read when the gateway
    // pauses the client (a socket read holds thousands of these frames).
    const gw = await gateway({ maxBufferedBytesPerClient: 4096 });
    const { socket, status } = await rawUpgrade(gw.url, { from: '127.0.18.4' });
    sockets.push(socket);
    assert.equal(status, 101);
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    await flood(socket);
    await untilQuiet(gw);
    // Start reading now: what the gateway managed to send arrives, then the connection ends.
    socket.on('data', () => undefined);
    socket.resume();
    await Promise.race([
      closed,
      new Promise((_, reject) =>
        setTimeout(() => reject(new Error('the slow client was not closed')), 15_000),
      ),
    ]);
    const metrics = await metricsOf(gw.adminUrl);
    assert.equal(metricSum(metrics, 'sluice_slow_clients_total', { action: 'closed' }), 1);
    await assertOthersServed(gw, '127.0.18.5');
  });

  it("is paused once a relay's answers to it pass the high-water mark: gateway memory stays bounded", async () => {
    // 400 stored events of about 2 KiB: each REQ's answer is some 0.8 MiB, read from the relay
    // many events at a time and held together on their way to a client that never reads.
    const direct = await NostrClient.connect(relay.url);
    const sk = generateSecretKey();
    const now = Math.floor(Date.now() / 1000);
    for (let i = 0; i < 400; i++) {
      const content = `${i} ${'y'.repeat(2000)}`;
      direct.send([
        'EVENT',
        finalizeEvent({ kind: 1, created_at: now - i, tags: [], content }, sk),
      ]);
    }
    await direct.until((m) => m.filter((x) => x[0] === 'OK' && x[2] === true).length === 400);
    direct.close();
    const gw = await gateway();
    const { socket, status } = await rawUpgrade(gw.url, { from: '127.0.18.6' });
    sockets.push(socket);
    assert.equal(status, 101);
    socket.pause();
    const before = rssBytes(gw.proc.pid);
    // A hundred REQs, never a byte read: some 80 MiB asked for.
    for (let n = 0; n < 100; n++) socket.write(clientTextFrame(`["REQ","s${n}",{"limit":400}]`));
    await waitFor(
      'the gateway to pause the client that does not read',
      async () =>
        metricSum(await metricsOf(gw.adminUrl), 'sluice_slow_clients_total', {
          action: 'paused',
        }) >= 1,
      30_000,
    );
    const peak = await untilQuiet(gw);
    const grew = peak - before;
    assert.ok(
      grew < RELAY_ANSWERS_GROWTH_BOUND,
      `gateway RSS grew by ${(grew / MiB).toFixed(1)} MiB`,
    );
    await assertOthersServed(gw, '127.0.18.7');
  });
});
