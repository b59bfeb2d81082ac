import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Cluster, Redis } from 'ioredis';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import { startPeerGateway } from '../../src/bench/peer-gateway.js';
import type { RunningPeerGateway } from '../../src/bench/peer-gateway.js';
import { runNostrLoad } from '../../src/bench/ws-load.js';
import { MODES, nodesFor, uniquePrefix } from '../helpers/env.js';
import { request, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { spawnSluice, startRelay } from '../helpers/processes.js';
import type { RelayProcess } from '../helpers/processes.js';

/** A fresh author, so what the relay holds of it belongs to one test alone. */
function author() {
  const sk = generateSecretKey();
  const now = Math.floor(Date.now() / 1000);
  return {
    pubkey: getPublicKey(sk),
    event: (i: number): string =>
      JSON.stringify(
        finalizeEvent({ kind: 1, created_at: now - i, tags: [], content: `peer ${i}` }, sk),
      ),
  };
}

let relay: RelayProcess;

async function storedBy(pubkey: string): Promise<number> {
  const res = await request(`${relay.url}/events?authors=${pubkey}&limit=1000`);
  assert.equal(res.status, 200);
  return (JSON.parse(res.body) as unknown[]).length;
}

before(async () => {
  relay = await startRelay({ nodeId: 'relay-peer' });
});

after(async () => {
  await relay.stop();
});

for (const mode of MODES) {
  describe(`peer gateway (@fastify/rate-limit, ioredis) on ${mode}`, { timeout: 120_000 }, () => {
    const nameSpace = `${uniquePrefix(`peer-${mode}`)}:`;
    const valkeyNodes = nodesFor(mode).map((n) => `${n.host}:${n.port}`);
    let peer: RunningPeerGateway;

    before(async () => {
      peer = await startPeerGateway({
        host: '127.0.0.1',
        port: 0,
        upstream: relay.url,
        valkey: { mode, nodes: mode === 'cluster' ? valkeyNodes.slice(0, 1) : valkeyNodes },
        points: 10,
        windowSec: 60,
        trustedProxies: ['127.0.0.1'],
        commandTimeoutMs: 1000,
        maxBodyBytes: 64 * 1024,
        nameSpace,
      });
    });
    after(async () => {
      await peer.close();
    });

    it('records what it was given', () => {
      assert.equal(peer.settings.client, 'ioredis');
      assert.equal(peer.settings.mode, mode);
      assert.equal(peer.settings.commandTimeoutMs, 1000);
      assert.equal(peer.settings.skipOnError, false);
      assert.equal(peer.settings.autoPipelining, false);
      assert.equal(peer.settings.max, 10);
      assert.equal(peer.settings.timeWindowMs, 60_000);
      assert.match(peer.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    });

    it('10 of 15 writes of one client reach the relay, 5 get 429; the count is in Valkey', async () => {
      const a = author();
      const results = [];
      for (let i = 0; i < 15; i++) {
        results.push(
          await request(`${peer.url}/events`, {
            method: 'POST',
            body: a.event(i),
            headers: { 'x-forwarded-for': '203.0.113.7' },
          }),
        );
      }
      assert.deepEqual(
        results.map((r) => r.status),
        [...Array<number>(10).fill(200), ...Array<number>(5).fill(429)],
      );
      const last = results[14]!;
      assert.equal(last.headers['x-ratelimit-limit'], '10');
      assert.equal(last.headers['x-ratelimit-remaining'], '0');
      assert.ok(Number(last.headers['retry-after']) >= 1);
      assert.equal(await storedBy(a.pubkey), 10, 'rejected writes never reach the relay');

      // The counter lives in this topology's Valkey, under the plugin's key for the client.
      const nodes = nodesFor(mode);
      const direct =
        mode === 'cluster'
          ? new Cluster(nodes.slice(0, 3), { lazyConnect: true })
          : new Redis({ ...nodes[0]!, lazyConnect: true });
      try {
        await direct.connect();
        assert.equal(await direct.get(`${nameSpace}203.0.113.7`), '15');
        assert.ok((await direct.pttl(`${nameSpace}203.0.113.7`)) > 50_000);
      } finally {
        direct.disconnect();
      }
    });

    it('another client has its own quota; reads are never limited', async () => {
      const a = author();
      for (let i = 0; i < 11; i++) {
        await request(`${peer.url}/events`, {
          method: 'POST',
          body: a.event(i),
          headers: { 'x-forwarded-for': '203.0.113.8' },
        });
      }
      const other = await request(`${peer.url}/events`, {
        method: 'POST',
        body: author().event(0),
        headers: { 'x-forwarded-for': '203.0.113.9' },
      });
      assert.equal(other.status, 200, 'a second client is independent');
      for (let i = 0; i < 15; i++) {
        const read = await request(`${peer.url}/events?authors=${a.pubkey}&limit=100`, {
          headers: { 'x-forwarded-for': '203.0.113.8' },
        });
        assert.equal(read.status, 200, 'GETs of a client over its write limit pass');
        assert.equal((JSON.parse(read.body) as unknown[]).length, 10);
      }
      const stats = await request(`${peer.url}/stats`, {
        headers: { 'x-forwarded-for': '203.0.113.8' },
      });
      assert.equal(stats.status, 200);
    });

    it('X-Forwarded-For from an untrusted peer is ignored', async () => {
      // 127.0.0.2 is not a trusted proxy: its requests count against 127.0.0.2 itself.
      const a = author();
      const statuses: number[] = [];
      for (let i = 0; i < 11; i++) {
        const res = await request(`${peer.url}/events`, {
          method: 'POST',
          body: a.event(i),
          from: '127.0.0.2',
          headers: { 'x-forwarded-for': `198.51.100.${i}` },
        });
        statuses.push(res.status);
      }
      assert.deepEqual(statuses, [...Array<number>(10).fill(200), 429]);
    });
  });
}

describe('sluice bench peer (the CLI)', { timeout: 120_000 }, () => {
  it('prints its ready line with the settings, proxies, and exits 0 on SIGTERM', async () => {
    const nodes = nodesFor('standalone').map((n) => `${n.host}:${n.port}`);
    const proc = await spawnSluice([
      'bench',
      'peer',
      '--port',
      '0',
      '--upstream',
      relay.url,
      '--valkey-mode',
      'standalone',
      '--valkey-nodes',
      nodes.join(','),
      '--points',
      '2',
      '--window-sec',
      '60',
      '--trusted-proxies',
      '127.0.0.1',
      '--name-space',
      `${uniquePrefix('peer-cli')}:`,
    ]);
    try {
      assert.equal(proc.ready.ready, 'peer');
      assert.match(proc.ready.url, /^http:\/\/127\.0\.0\.1:\d+$/);
      const settings = proc.ready.settings as { client: string; max: number };
      assert.equal(settings.client, 'ioredis');
      assert.equal(settings.max, 2);
      const a = author();
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) {
        const res = await request(`${proc.url}/events`, {
          method: 'POST',
          body: a.event(i),
          headers: { 'x-forwarded-for': '192.0.2.1' },
        });
        statuses.push(res.status);
      }
      assert.deepEqual(statuses, [200, 200, 429]);
    } finally {
      assert.equal(await proc.stop(), 0, 'exits cleanly on SIGTERM');
    }
  });
});

describe('runNostrLoad', { timeout: 120_000 }, () => {
  const pool = (() => {
    const a = author();
    return Array.from({ length: 200 }, (_, i) => a.event(i));
  })();
  const wsUrl = (url: string) => url.replace(/^http/, 'ws');

  it('against a relay directly: every EVENT gets OK true, no errors', async () => {
    const seen: number[] = [];
    const result = await runNostrLoad({
      url: wsUrl(relay.url),
      connections: 4,
      durationSec: 1,
      events: pool,
      headersFor: () => ({}),
      onProgress: (s) => seen.push(s),
    });
    assert.ok(result.counts.requests > 0, JSON.stringify(result));
    assert.equal(result.counts.ok, result.counts.requests);
    assert.equal(result.counts.limited, 0);
    assert.equal(result.counts.otherRejected, 0);
    assert.equal(result.counts.errors, 0);
    assert.equal(result.counts.timeouts, 0);
    // The 1 s window, give or take a timer that fires late on a busy machine.
    assert.ok(result.wallSeconds >= 0.99 && result.wallSeconds < 2, `${result.wallSeconds}`);
    assert.ok(result.latencyMs !== null);
    assert.ok(result.latencyMs.p50 > 0 && result.latencyMs.p50 <= result.latencyMs.p99);
    assert.ok(result.latencyMs.p99 <= result.latencyMs.max);
    assert.ok(seen.length <= 1);
  });

  it('counts a connection that cannot open as an error, without throwing', async () => {
    const result = await runNostrLoad({
      url: 'ws://127.0.0.1:1',
      connections: 2,
      durationSec: 1,
      events: pool,
      headersFor: () => ({}),
    });
    assert.equal(result.counts.errors, 2);
    assert.equal(result.counts.requests, 0);
    assert.equal(result.latencyMs, null);
  });

  describe(
    'against a sluice gateway with a write quota of 5 per client',
    { timeout: 60_000 },
    () => {
      let gw: GatewayUnderTest;
      before(async () => {
        gw = await startGateway('ioredis', 'standalone', [{ id: 'relay-peer', url: relay.url }], {
          trustedProxies: ['127.0.0.1'],
          identity: { order: ['ip'] },
          // The load cycles a pool of 200 events, so a refused one comes back at once: a
          // bouncer, which the gateway would hold and close (limits.earlyRetries). What is
          // counted here is each answer, so early copies are answered at once and never close.
          limits: { earlyRetries: { holdMs: 1, max: 1_000_000 } },
          quotas: {
            keyPrefix: uniquePrefix('wsload').replace(/[^A-Za-z0-9:_-]/g, '-'),
            tiers: { default: { write: { points: 5, windowSec: 60 } } },
          },
        });
      });
      after(async () => {
        assert.equal(await gw.proc.stop(), 0);
      });

      it('each connection is its own client (X-Forwarded-For): 5 admitted each, the rest limited', async () => {
        const result = await runNostrLoad({
          url: wsUrl(gw.url),
          connections: 4,
          durationSec: 1,
          events: pool,
          headersFor: (conn) => ({ 'x-forwarded-for': `10.9.0.${conn + 1}` }),
        });
        assert.ok(result.counts.limited > 0, JSON.stringify(result));
        assert.equal(result.counts.ok + result.counts.limited, result.counts.requests);
        assert.equal(result.counts.ok, 20, 'four clients, five writes each');
        assert.equal(result.counts.errors, 0);
        assert.equal(result.counts.timeouts, 0);
      });
    },
  );
});
