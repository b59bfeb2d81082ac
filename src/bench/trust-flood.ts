/**
 * The benchmark of nostr.trust (docs/BENCHMARKS.md, "Trust from the relay's follow graph"):
 *
 * 1. memory: the bytes a key of the set costs, as the walk holds it (a Set of hex strings)
 *    and as it serves (PubkeySet, packed), for `--keys` keys;
 * 2. refresh: a reference relay holding a seed following `--lists` accounts, each following
 *    `--follows` fresh pubkeys (lists x follows edges), walked at hops 2 as the gateway does
 *    (TrustGraph: in a worker thread), with this thread's event-loop delay meanwhile;
 * 3. flood: a gateway in front of that relay with the set in force; from one address, a wave
 *    of rotating fresh keys and `--users` followed accounts writing for `--seconds`, and the
 *    gateway's event-loop delay over the flood (its metrics, reset by the scrape before it).
 *
 * node dist/src/bench/trust-flood.js --valkey 127.0.0.1:6379 [--lists 1000 --follows 1000]
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import WebSocket from 'ws';
import { startGateway, startRelay } from '../harness/processes.js';
import { PubkeySet } from '../trust/pubkey-set.js';
import { TrustGraph, workerLimits } from '../trust/trust-graph.js';
import type { TrustSettings } from '../trust/trust-graph.js';

const { values: args } = parseArgs({
  options: {
    valkey: { type: 'string', default: '127.0.0.1:6379' },
    keys: { type: 'string', default: '1000000' },
    lists: { type: 'string', default: '1000' },
    follows: { type: 'string', default: '1000' },
    users: { type: 'string', default: '20' },
    seconds: { type: 'string', default: '20' },
    'refresh-sec': { type: 'string', default: '3' },
    /** The refresh part's worker heap (default: workerLimits, as the gateway sets it). */
    'worker-heap-mb': { type: 'string' },
  },
});

/** A followed user's write quota a minute: the flood shows each held to it. */
const FOLLOWED_POINTS = 30;

const randomHex = () => Buffer.from(generateSecretKey()).toString('hex');
const heapUsed = () => {
  (globalThis as { gc?: () => void }).gc?.();
  return process.memoryUsage().heapUsed + process.memoryUsage().arrayBuffers;
};

/** Heap bytes a key costs in a Set of hex strings (strings included) and packed. */
function memory(keys: number) {
  const base = heapUsed();
  const set = new Set<string>();
  for (let i = 0; i < keys; i++) set.add(randomHex());
  const withSet = heapUsed();
  const packed = PubkeySet.of(set);
  const withPacked = heapUsed();
  return {
    keys,
    setBytesPerKey: Math.round((withSet - base) / keys),
    packedBytesPerKey: Math.round((withPacked - withSet) / keys),
    packedBytes: packed.bytes,
  };
}

function percentiles(ms: number[]) {
  const sorted = [...ms].sort((a, b) => a - b);
  const at = (q: number) =>
    +(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0).toFixed(1);
  return { p50: at(0.5), p99: at(0.99), max: at(1) };
}

class Conn {
  private waiting = new Map<string, (ok: unknown[]) => void>();
  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const msg = JSON.parse((data as Buffer).toString('utf8')) as unknown[];
      if (msg[0] === 'OK') this.waiting.get(msg[1] as string)?.(msg);
    });
  }
  static async open(url: string, from = '127.0.0.1'): Promise<Conn> {
    const ws = new WebSocket(url.replace(/^http/, 'ws'), {
      localAddress: from,
      maxPayload: 64 << 20,
    });
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    return new Conn(ws);
  }
  write(e: Event): Promise<unknown[]> {
    return new Promise((resolve) => {
      this.waiting.set(e.id, (ok) => {
        this.waiting.delete(e.id);
        resolve(ok);
      });
      this.ws.send(JSON.stringify(['EVENT', e]));
    });
  }
}

const note = (sk: Uint8Array, content: string) =>
  finalizeEvent({ kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content }, sk);
const followList = (sk: Uint8Array, follows: string[]) =>
  finalizeEvent(
    {
      kind: 3,
      created_at: Math.floor(Date.now() / 1000),
      tags: follows.map((p) => ['p', p]),
      content: '',
    },
    sk,
  );

/** A gauge's value in a Prometheus text scrape (0 when absent). */
function valueIn(scrape: string, name: string): number {
  const line = scrape.split('\n').find((l) => l.startsWith(name));
  return line ? Number(line.split(' ').pop()) : 0;
}

async function main() {
  const lists = Number(args.lists);
  const follows = Number(args.follows);
  console.log(JSON.stringify({ part: 'memory', ...memory(Number(args.keys)) }));

  const relay = await startRelay({
    nodeId: 'trust-bench',
    extraArgs: ['--max-event-bytes', String(1 << 20)],
  });
  let gateway: Awaited<ReturnType<typeof startGateway>> | undefined;
  try {
    const seed = generateSecretKey();
    const accounts = Array.from({ length: lists }, () => generateSecretKey());
    const publisher = await Conn.open(relay.url);
    const began = performance.now();
    await publisher.write(
      followList(
        seed,
        accounts.map((sk) => getPublicKey(sk)),
      ),
    );
    for (const sk of accounts) {
      await publisher.write(followList(sk, Array.from({ length: follows }, randomHex)));
    }
    publisher.ws.close();
    const publishMs = Math.round(performance.now() - began);

    const settings: TrustSettings = {
      tier: 'followed',
      seeds: [getPublicKey(seed)],
      hops: 2,
      refreshSec: 600,
      timeoutSec: 300,
      // The default's order: the worker's heap bound near the default's (619 MB).
      maxPubkeys: 1_100_000,
      maxFollowsPerList: 5000,
      authorsPerReq: 100,
      maxEventBytes: 1 << 20,
      verifySignatures: true,
    };
    const url = relay.url.replace(/^http/, 'ws');
    const rssBefore = process.memoryUsage().rss;
    const delay = monitorEventLoopDelay({ resolution: 10 });
    delay.enable();
    const heapMb = args['worker-heap-mb'];
    const resourceLimits = heapMb ? { maxOldGenerationSizeMb: Number(heapMb) } : undefined;
    const graph = new TrustGraph(settings, {
      url,
      swapped: () => undefined,
      ...(resourceLimits ? { resourceLimits } : {}),
    });
    const walk = await graph.refresh();
    delay.disable();
    if (!walk.ok) throw new Error(`the refresh failed: ${walk.error}`);
    const set = graph.set;
    console.log(
      JSON.stringify({
        part: 'refresh',
        edges: walk.edges,
        lists: walk.lists,
        pubkeys: set.size,
        setBytes: set.bytes,
        publishMs,
        refreshMs: walk.ms,
        workerHeapMb: (resourceLimits ?? workerLimits(settings)).maxOldGenerationSizeMb,
        rssGrowthBytes: process.memoryUsage().rss - rssBefore,
        // This thread's event loop while the worker walked (ms).
        eventLoopDelayMs: {
          p99: +(delay.percentile(99) / 1e6).toFixed(1),
          max: +(delay.max / 1e6).toFixed(1),
        },
      }),
    );
    graph.stop();

    const users = accounts.slice(0, Number(args.users));
    const seconds = Number(args.seconds);
    gateway = await startGateway(
      {
        listen: { port: 0 },
        admin: { port: 0, token: 'trust-bench-admin-token-0123456789' },
        valkey: { client: 'iovalkey', mode: 'standalone', nodes: [args.valkey] },
        upstreams: [{ id: 'trust-bench', url: relay.url }],
        identity: { order: ['pubkey', 'ip'] },
        quotas: {
          keyPrefix: `trustbench${Date.now().toString(36)}`,
          tiers: {
            default: { write: { points: 60, windowSec: 60 } },
            followed: { write: { points: FOLLOWED_POINTS, windowSec: 60 }, chargeAddress: false },
          },
        },
        nostr: { trust: { ...settings, refreshSec: Number(args['refresh-sec']) } },
        logging: { level: 'warn' },
        workers: 1,
      },
      path.join(mkdtempSync(path.join(os.tmpdir(), 'trust-bench-')), 'gateway.json'),
    );
    const admin = gateway.adminUrl;
    const scrape = async () => {
      const res = await fetch(`${admin}/metrics`, {
        headers: { authorization: 'Bearer trust-bench-admin-token-0123456789' },
      });
      return res.text();
    };
    const metric = async (name: string) => valueIn(await scrape(), name);
    const t1 = performance.now();
    while ((await metric('sluice_trust_pubkeys ')) < set.size) {
      if (performance.now() - t1 > 300_000) throw new Error('the gateway did not load the set');
      await new Promise((r) => setTimeout(r, 200));
    }
    const gatewayLoadMs = Math.round(performance.now() - t1);
    const refreshesBefore = await metric('sluice_trust_refreshes_total{outcome="ok"}');

    const from = '127.0.50.2';
    const end = Date.now() + seconds * 1000;
    const spam = { sent: 0, accepted: 0 };
    const followed = { sent: 0, accepted: 0 };
    const latencies: number[] = [];
    const spammers = await Promise.all(
      Array.from({ length: 4 }, () => Conn.open(gateway!.url, from)),
    );
    const userConns = await Promise.all(users.map(() => Conn.open(gateway!.url, from)));
    await Promise.all([
      ...spammers.map(async (c) => {
        while (Date.now() < end) {
          spam.sent++;
          if ((await c.write(note(generateSecretKey(), 'spam')))[2] === true) spam.accepted++;
        }
      }),
      ...userConns.map(async (c, i) => {
        for (let n = 0; Date.now() < end; n++) {
          followed.sent++;
          const t = performance.now();
          const ok = await c.write(note(users[i]!, `post ${n}`));
          latencies.push(performance.now() - t);
          if (ok[2] === true) followed.accepted++;
          await new Promise((r) => setTimeout(r, 100));
        }
      }),
    ]);
    for (const c of [...spammers, ...userConns]) c.ws.close();
    // The first scrape since the flood began: prom-client's event-loop figures cover it.
    const after = await scrape();
    const lagMs = (name: string) => +(valueIn(after, name) * 1000).toFixed(1);
    console.log(
      JSON.stringify({
        part: 'flood',
        seconds,
        spam: {
          ...spam,
          acceptedPerSec: +(spam.accepted / seconds).toFixed(2),
          sentPerSec: Math.round(spam.sent / seconds),
        },
        followed: {
          users: users.length,
          ...followed,
          acceptedPerSecPerUser: +(followed.accepted / users.length / seconds).toFixed(2),
          quotaPerUser: FOLLOWED_POINTS,
          latencyMs: percentiles(latencies),
        },
        gatewayLoadMs,
        refreshesDuringFlood:
          valueIn(after, 'sluice_trust_refreshes_total{outcome="ok"}') - refreshesBefore,
        // The gateway's event-loop delay over the flood (ms).
        gatewayEventLoopDelayMs: {
          p50: lagMs('sluice_nodejs_eventloop_lag_p50_seconds '),
          p99: lagMs('sluice_nodejs_eventloop_lag_p99_seconds '),
          max: lagMs('sluice_nodejs_eventloop_lag_max_seconds '),
        },
        loadAverage: os.loadavg().map((l) => +l.toFixed(2)),
        // Decisions by outcome: an insured one was taken while Valkey did not answer in time.
        decisions: after.split('\n').filter((l) => l.startsWith('sluice_decisions_total')),
      }),
    );
  } finally {
    await gateway?.proc.stop();
    await relay.stop();
  }
}

await main();
