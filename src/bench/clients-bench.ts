/**
 * Memory per client: a real gateway process (quotas on, in-memory block on) takes writes from
 * N distinct clients, each named by X-Forwarded-For through a trusted loopback proxy, each
 * going over a limit of 1 per window once (one write admitted, one refused). The gateway's
 * RSS is read from /proc before and after; every per-client structure in it is bounded
 * (limits.maxTrackedClients), so RSS must level off however many clients come.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Pool } from 'undici';
import { WebSocket } from 'ws';
import type { ClientKind, NodeAddress } from '../store/index.js';
import { adminUrlOf, startGateway } from '../harness/processes.js';
import type { SluiceProcess } from '../harness/processes.js';
import { withBenchValkey } from './own-valkey.js';
import { BENCH_ADMIN_TOKEN } from './run/gateway-config.js';

export interface ClientsBenchOptions {
  /** Distinct clients; each sends two writes against a limit of one. */
  clients: number;
  /** Concurrent connections from the load generator. */
  connections: number;
  valkeyClient: ClientKind;
  /** A standalone Valkey to use; one is started on a free port when absent. */
  valkey?: NodeAddress;
  /** limits.maxTrackedClients for the gateway (its default when absent). */
  maxTrackedClients?: number;
  /** Seconds to wait after the load before reading RSS again. */
  settleSec: number;
}

export interface ClientsBenchResult {
  clients: number;
  seconds: number;
  requestsPerSec: number;
  admitted: number;
  refused: number;
  /** Answers other than 200 and 429, and requests that failed. */
  unexpected: number;
  /** Before the load, after a full garbage collection. */
  rssBeforeMiB: number;
  /** After the load and the settle time, garbage and all: V8 collects when it sees fit. */
  rssAfterMiB: number;
  /** After a full garbage collection: what the gateway holds. */
  rssAfterGcMiB: number;
  /** VmHWM: the highest RSS the gateway reached. */
  rssPeakMiB: number;
  /** The gateway's V8 heap after the full collection (its /metrics), used and reserved. */
  heapUsedMiB: number;
  heapTotalMiB: number;
  /** sluice_tracked_clients after the load, by structure. */
  tracked: Record<string, number>;
  /** Every client was admitted exactly once and refused exactly once. */
  exact: boolean;
}

/** VmRSS and VmHWM of a process, in MiB. */
export function processRssMiB(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => {
    const m = new RegExp(`^${name}:\\s+(\\d+) kB$`, 'm').exec(status);
    if (!m) throw new Error(`no ${name} in /proc/${pid}/status`);
    return Number(m[1]) / 1024;
  };
  return { rss: field('VmRSS'), peak: field('VmHWM') };
}

/** Client i as an IPv4 address: 16M distinct addresses, no two clients alike. */
export function clientAddressOf(i: number): string {
  return `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
}

/** An upstream that answers every request 200 at once: the relay's cost is not measured. */
export async function startStubRelay(): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.once('end', () => res.end('{}'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * A gateway of one process in front of the stub relay, for a load generator that names its
 * clients in X-Forwarded-For and writes `{}` (judged by route, not as Nostr events).
 */
export function stubRelayGatewayConfig(
  valkeyClient: ClientKind,
  valkey: NodeAddress,
  relayUrl: string,
) {
  return {
    listen: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0, token: BENCH_ADMIN_TOKEN },
    valkey: {
      client: valkeyClient,
      nodes: [`${valkey.host}:${valkey.port}`],
      commandTimeoutMs: 2000,
    },
    upstreams: [{ id: 'relay-a', url: relayUrl }],
    // The load generator is the only peer; it names its clients in X-Forwarded-For.
    trustedProxies: ['127.0.0.1'],
    logging: { level: 'warn', requests: false },
    workers: 1,
    identity: { order: ['ip'] },
    // Its writes are `{}` to a stand-in upstream: judged by route, not as Nostr events.
    nostr: { httpEventPaths: [] },
  };
}

function gatewayConfig(opts: ClientsBenchOptions, valkey: NodeAddress, relayUrl: string) {
  return {
    ...stubRelayGatewayConfig(opts.valkeyClient, valkey, relayUrl),
    ...(opts.maxTrackedClients ? { limits: { maxTrackedClients: opts.maxTrackedClients } } : {}),
    quotas: {
      enabled: true,
      inMemoryBlock: true,
      // A fresh counter space per run: no run inherits another's consumption.
      keyPrefix: `bench-clients-${Date.now().toString(36)}`,
      // One write an hour: no block or counter expires during the run (the worst case).
      tiers: { default: { write: { points: 1, windowSec: 3600 } } },
    },
  };
}

interface Tally {
  admitted: number;
  refused: number;
  unexpected: number;
}

/** POST `{}` to `path` as the client `xff` names: the answer's status, undefined if it failed. */
export async function postAs(pool: Pool, path: string, xff: string): Promise<number | undefined> {
  try {
    const res = await pool.request({
      method: 'POST',
      path,
      headers: { 'content-type': 'application/json', 'x-forwarded-for': xff },
      body: '{}',
    });
    await res.body.dump();
    return res.statusCode;
  } catch {
    return undefined;
  }
}

/** Each client sends two writes, one after the other; `connections` clients at a time. */
async function sendWrites(
  url: string,
  opts: ClientsBenchOptions,
  tally: Tally,
  progress: (done: number) => void,
): Promise<void> {
  const pool = new Pool(url, { connections: opts.connections, pipelining: 1 });
  let next = 0;
  const write = async (xff: string) => {
    const status = await postAs(pool, '/events', xff);
    if (status === 200) tally.admitted++;
    else if (status === 429) tally.refused++;
    else tally.unexpected++;
  };
  const worker = async () => {
    for (let i = next++; i < opts.clients; i = next++) {
      const xff = clientAddressOf(i);
      await write(xff);
      await write(xff);
      if ((i + 1) % 10_000 === 0) progress(i + 1);
    }
  };
  try {
    await Promise.all(Array.from({ length: opts.connections }, worker));
  } finally {
    await pool.close();
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A full garbage collection in the gateway, through its inspector (loopback, a free port):
 * what RSS holds then is what the clients cost, not garbage V8 has not yet collected.
 */
async function collectGarbage(gateway: SluiceProcess): Promise<void> {
  const url = /Debugger listening on (ws:\/\/\S+)/.exec(gateway.output())?.[1];
  if (!url) throw new Error('the gateway has no inspector to collect garbage through');
  const ws = new WebSocket(url);
  try {
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no answer to collectGarbage')), 30_000);
      ws.on('message', (data: Buffer) => {
        if ((JSON.parse(data.toString()) as { id?: number }).id === 1) {
          clearTimeout(timer);
          resolve();
        }
      });
      ws.send(JSON.stringify({ id: 1, method: 'HeapProfiler.collectGarbage' }));
    });
  } finally {
    ws.close();
  }
}

/** The heap and tracked-client gauges from the gateway's /metrics. */
async function gatewayGauges(adminUrl: string) {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
  const tracked: Record<string, number> = {};
  for (const m of text.matchAll(/^sluice_tracked_clients\{structure="([^"]+)"\} (\S+)$/gm)) {
    tracked[m[1]!] = Number(m[2]);
  }
  return {
    heapUsedMiB: value('sluice_nodejs_heap_size_used_bytes') / 2 ** 20,
    heapTotalMiB: value('sluice_nodejs_heap_size_total_bytes') / 2 ** 20,
    tracked,
  };
}

export async function runClientsBench(
  opts: ClientsBenchOptions,
  log: (line: string) => void,
): Promise<ClientsBenchResult> {
  return withBenchValkey('bench-clients', opts.valkey, log, (valkey, env) =>
    measureClients(opts, valkey, env, log),
  );
}

/** The gateway's RSS before and after the clients, against this Valkey. */
async function measureClients(
  opts: ClientsBenchOptions,
  valkey: NodeAddress,
  env: NodeJS.ProcessEnv,
  log: (line: string) => void,
): Promise<ClientsBenchResult> {
  const configDir = mkdtempSync(path.join(os.tmpdir(), 'sluice-bench-clients-'));
  let relay: Awaited<ReturnType<typeof startStubRelay>> | undefined;
  let gateway: SluiceProcess | undefined;
  try {
    relay = await startStubRelay();
    const file = path.join(configDir, 'gateway.json');
    // The inspector is there only so that the benchmark can ask for full garbage collections.
    const inspect = `${process.env.NODE_OPTIONS ?? ''} --inspect=127.0.0.1:0`.trim();
    ({ proc: gateway } = await startGateway(gatewayConfig(opts, valkey, relay.url), file, {
      env: { ...env, NODE_OPTIONS: inspect },
    }));
    await collectGarbage(gateway);
    await sleep(1000);
    const before = processRssMiB(gateway.pid);
    log(`gateway pid ${gateway.pid} ready, RSS ${before.rss.toFixed(1)} MiB`);

    const tally: Tally = { admitted: 0, refused: 0, unexpected: 0 };
    const started = performance.now();
    await sendWrites(gateway.url, opts, tally, (done) => {
      const { rss } = processRssMiB(gateway!.pid);
      log(`${done} clients, RSS ${rss.toFixed(1)} MiB`);
    });
    const seconds = (performance.now() - started) / 1000;
    await sleep(opts.settleSec * 1000);
    const after = processRssMiB(gateway.pid);
    await collectGarbage(gateway);
    await sleep(1000);
    const afterGc = processRssMiB(gateway.pid);
    const gauges = await gatewayGauges(adminUrlOf(gateway));
    return {
      clients: opts.clients,
      seconds,
      requestsPerSec: (2 * opts.clients) / seconds,
      ...tally,
      rssBeforeMiB: before.rss,
      rssAfterMiB: after.rss,
      rssAfterGcMiB: afterGc.rss,
      rssPeakMiB: after.peak,
      ...gauges,
      exact: tally.admitted === opts.clients && tally.refused === opts.clients && !tally.unexpected,
    };
  } finally {
    await gateway?.stop();
    await relay?.close();
    rmSync(configDir, { recursive: true, force: true });
  }
}

export function formatClientsBench(r: ClientsBenchResult, opts: ClientsBenchOptions): string {
  const bound = opts.maxTrackedClients ?? 'default';
  const tracked = Object.entries(r.tracked)
    .map(([structure, n]) => `${structure} ${n}`)
    .join(', ');
  return [
    '| clients | Valkey client | maxTrackedClients | RSS before (full GC) MiB | RSS after MiB | RSS after full GC MiB | peak MiB | heap used / reserved after GC MiB | writes/s | admitted / refused / other |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    `| ${r.clients} | ${opts.valkeyClient} | ${bound} | ${r.rssBeforeMiB.toFixed(1)} | ${r.rssAfterMiB.toFixed(1)} | ${r.rssAfterGcMiB.toFixed(1)} | ${r.rssPeakMiB.toFixed(1)} | ${r.heapUsedMiB.toFixed(1)} / ${r.heapTotalMiB.toFixed(1)} | ${r.requestsPerSec.toFixed(0)} | ${r.admitted} / ${r.refused} / ${r.unexpected} |`,
    '',
    `tracked clients after the load: ${tracked || 'none reported'}`,
    ...(r.exact ? [] : ['NOT EXACT: every client should be admitted once and refused once.']),
  ].join('\n');
}
