/**
 * `sluice gateway --workers 2`: two processes serve the port (the primary hands each client's
 * connections to one of them, by address), quotas stay exact across them
 * (Valkey holds the counters), /metrics on the one admin listener sums them, SIGHUP and
 * shutdown reach both, and a killed worker is replaced.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { admin, request, startGateway } from '../helpers/gateway.js';
import type { GatewayUnderTest } from '../helpers/gateway.js';
import { startRelay, stopAll } from '../helpers/processes.js';
import type { SluiceProcess } from '../helpers/processes.js';
import { inBatches, waitFor } from '../helpers/raw-socket.js';

const LIMIT = 40;

function workerPids(gw: GatewayUnderTest): number[] {
  const list = gw.proc.ready.workers;
  assert.ok(list?.length, `the ready line names the workers: ${JSON.stringify(gw.proc.ready)}`);
  return list;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Bytes a process has written through system calls (its sockets included). */
function bytesWritten(pid: number): number {
  return Number(/wchar:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))![1]);
}

async function metric(gw: GatewayUnderTest, pattern: RegExp): Promise<number> {
  const text = (await request(`${gw.adminUrl}/metrics`)).body;
  return Number(pattern.exec(text)?.[1] ?? 0);
}

/**
 * Writes from one client, each on a new connection, from one address (one worker serves it)
 * or several in turn (spread over the workers), with `headers` (an API key) added.
 */
async function writes(
  gw: GatewayUnderTest,
  count: number,
  from: string | readonly string[],
  headers: Record<string, string> = {},
): Promise<number[]> {
  const addresses = typeof from === 'string' ? [from] : from;
  return inBatches(
    Array.from({ length: count }, (_, i) => i),
    8,
    async (i) =>
      (
        await request(`${gw.url}/events`, {
          method: 'POST',
          body: JSON.stringify({ n: i }),
          headers: { 'content-type': 'application/json', connection: 'close', ...headers },
          from: addresses[i % addresses.length]!,
        })
      ).status,
  );
}

/** One API key, sent from addresses that the primary hands to both workers. */
const SHARED_KEY = 'workers-shared-api-key';
const SPREAD = Array.from({ length: 8 }, (_, i) => `127.0.9.${20 + i}`);

describe('gateway with two workers', { timeout: 180_000 }, () => {
  let relay: SluiceProcess;
  let gw: GatewayUnderTest;

  before(async () => {
    relay = await startRelay({ nodeId: 'relay-a' });
    gw = await startGateway('iovalkey', 'standalone', [{ id: 'relay-a', url: relay.url }], {
      workers: 2,
      // Info: the reload test reads each process's "configuration reloaded" line.
      logging: { level: 'info' },
      identity: { order: ['apiKey', 'ip'] },
      // Its writes are small JSON stand-ins, not events: no event policy on /events here.
      nostr: { httpEventPaths: [] },
      quotas: {
        keyPrefix: `workers${Date.now()}`,
        tiers: { default: { write: { points: LIMIT, windowSec: 120 } } },
        apiKeys: { [SHARED_KEY]: 'default' },
      },
    });
  });

  after(async () => {
    await stopAll(gw?.proc, relay);
  });

  it('shares one quota across both workers, exactly, and both serve', async () => {
    const pids = workerPids(gw);
    assert.equal(pids.length, 2);
    const before = pids.map(bytesWritten);
    // One client (an API key) over several addresses: the primary spreads them by address.
    const statuses = await writes(gw, LIMIT + 30, SPREAD, { 'x-api-key': SHARED_KEY });
    const admitted = statuses.filter((s) => s !== 429).length;
    assert.equal(admitted, LIMIT, `admitted across workers: ${JSON.stringify(statuses)}`);
    assert.equal(statuses.filter((s) => s === 429).length, 30);
    pids.forEach((pid, i) => {
      const wrote = bytesWritten(pid) - before[i]!;
      assert.ok(wrote > 10_000, `worker ${pid} served part of the load (wrote ${wrote} bytes)`);
    });
  });

  it('sums both workers in /metrics on the one admin listener', async () => {
    const allowed = await metric(gw, /^sluice_decisions_total\{outcome="allowed"[^}]*\} (\d+)/m);
    const limited = await metric(gw, /^sluice_decisions_total\{outcome="limited"[^}]*\} (\d+)/m);
    assert.equal(allowed, LIMIT);
    assert.equal(limited, 30);
    assert.equal(await metric(gw, /^sluice_multiplier\{[^}]*\} ([\d.]+)/m), 1, 'not summed');
    // The token is decided by the workers' own routes, as with one process.
    assert.equal((await admin(gw, 'GET', '/admin/flow-control', undefined, '')).status, 401);
    assert.equal((await admin(gw, 'GET', '/admin/flow-control')).status, 200);
  });

  it('applies an admin change and a SIGHUP reload in every worker', async () => {
    const change = await admin(gw, 'POST', '/admin/flow-control', {
      tiers: { default: { write: { points: 5, windowSec: 120 } } },
    });
    assert.equal(change.status, 200, change.body);
    // Whichever worker serves them, a fresh client gets exactly the new limit.
    let statuses = await writes(gw, 15, '127.0.9.3');
    assert.equal(statuses.filter((s) => s !== 429).length, 5, JSON.stringify(statuses));

    const config = JSON.parse(readFileSync(gw.configFile, 'utf8')) as {
      quotas: { tiers: { default: { write: { points: number } } } };
    };
    config.quotas.tiers.default.write.points = 7;
    writeFileSync(gw.configFile, JSON.stringify(config));
    process.kill(gw.proc.pid, 'SIGHUP');
    await waitFor(
      'both workers reloaded',
      () => (gw.proc.output().match(/configuration reloaded/g) ?? []).length >= 3,
      10_000,
    );
    statuses = await writes(gw, 15, '127.0.9.4');
    assert.equal(statuses.filter((s) => s !== 429).length, 7, JSON.stringify(statuses));
  });

  it('replaces a worker that dies and keeps serving', async () => {
    const [victim, survivor] = workerPids(gw);
    process.kill(victim!, 'SIGKILL');
    await waitFor('a new worker', () => /gateway worker died/.test(gw.proc.output()), 10_000);
    await waitFor(
      'two workers again',
      async () =>
        (JSON.parse((await request(`${gw.adminUrl}/healthz`)).body) as { workers: number })
          .workers === 2,
      15_000,
    );
    assert.ok(alive(survivor!));
    const statuses = await writes(gw, 10, '127.0.9.5');
    assert.ok(
      statuses.every((s) => s < 500),
      `served: ${JSON.stringify(statuses)}`,
    );
  });

  it('stops every worker on SIGTERM and exits 0', async () => {
    const health = JSON.parse((await request(`${gw.adminUrl}/healthz`)).body) as {
      workers: number;
      pids: number[];
    };
    assert.equal(health.workers, 2);
    const children = health.pids;
    assert.ok(children.every(alive));
    const code = await gw.proc.stop('SIGTERM');
    assert.equal(code, 0, gw.proc.output());
    for (const pid of children) assert.equal(alive(pid), false, `worker ${pid} is gone`);
  });
});

describe('a worker stopping with a request in flight', { timeout: 60_000 }, () => {
  let upstream: http.Server;
  let gw: GatewayUnderTest;
  /** Resolved when the slow relay holds a write; the answer comes `SLOW_MS` later. */
  let arrived: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (arrived = resolve));
  const SLOW_MS = 1500;

  before(async () => {
    upstream = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        if (!req.url?.startsWith('/events')) return res.end('{}');
        arrived();
        setTimeout(() => res.end('{"stored":true}'), SLOW_MS);
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const { port } = upstream.address() as AddressInfo;
    gw = await startGateway(
      'iovalkey',
      'standalone',
      [{ id: 'slow', url: `http://127.0.0.1:${port}` }],
      {
        workers: 2,
        healthCheck: { intervalMs: 500, path: '/' },
        nostr: { httpEventPaths: [] },
        quotas: { keyPrefix: `wstop${Date.now().toString(36)}` },
      },
    );
  });

  after(async () => {
    await gw?.proc.stop();
    upstream?.closeAllConnections();
    await new Promise((resolve) => upstream?.close(resolve));
  });

  it('answers it before the worker exits on SIGTERM', async () => {
    const answer = request(`${gw.url}/events`, { method: 'POST', body: '{}' });
    await held;
    const code = gw.proc.stop('SIGTERM');
    const { status, body } = await answer;
    assert.equal(status, 200, body);
    assert.equal(await code, 0, gw.proc.output());
  });
});
