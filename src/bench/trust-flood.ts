/**
 * The benchmark of nostr.trust (docs/BENCHMARKS.md, "Trust from the relay's follow graph"):
 *
 * 1. memory: the bytes a key of the set costs, as the walk holds it (a Set of hex strings)
 *    and as it serves (PubkeySet, packed), for `--keys` keys;
 * 2. refresh: a reference relay holding a seed following `--lists` accounts, each following
 *    `--follows` fresh pubkeys (lists x follows edges), walked at hops 2 as the gateway does;
 * 3. flood: a gateway in front of that relay with the set in force; from one address, a wave
 *    of rotating fresh keys and `--users` followed accounts writing for `--seconds`.
 *
 * node dist/src/bench/trust-flood.js --valkey 127.0.0.1:6379 [--lists 1000 --follows 1000]
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import WebSocket from 'ws';
import { startGateway, startRelay } from '../harness/processes.js';
import { initSignatureVerifier, verifySignature } from '../nostr/verify.js';
import { PubkeySet } from '../trust/pubkey-set.js';
import { readTrustSet, trustSource } from '../trust/trust-graph.js';
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

async function main() {
  await initSignatureVerifier();
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
      maxPubkeys: 10_000_000,
      maxFollowsPerList: 5000,
      authorsPerReq: 100,
      maxEventBytes: 1 << 20,
      verifySignatures: true,
    };
    const url = relay.url.replace(/^http/, 'ws');
    const rssBefore = process.memoryUsage().rss;
    const t0 = performance.now();
    const { set, walk } = await readTrustSet(
      settings,
      trustSource(settings, { url }),
      verifySignature,
    );
    console.log(
      JSON.stringify({
        part: 'refresh',
        edges: walk.edges,
        lists: walk.lists,
        pubkeys: set.size,
        setBytes: set.bytes,
        publishMs,
        refreshMs: Math.round(performance.now() - t0),
        rssGrowthBytes: process.memoryUsage().rss - rssBefore,
      }),
    );

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
    const metric = async (name: string) => {
      const res = await fetch(`${admin}/metrics`, {
        headers: { authorization: 'Bearer trust-bench-admin-token-0123456789' },
      });
      const line = (await res.text()).split('\n').find((l) => l.startsWith(name));
      return line ? Number(line.split(' ').pop()) : 0;
    };
    const metricLines = async (prefix: string) => {
      const res = await fetch(`${admin}/metrics`, {
        headers: { authorization: 'Bearer trust-bench-admin-token-0123456789' },
      });
      return (await res.text()).split('\n').filter((l) => l.startsWith(prefix));
    };
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
          (await metric('sluice_trust_refreshes_total{outcome="ok"}')) - refreshesBefore,
        loadAverage: os.loadavg().map((l) => +l.toFixed(2)),
        // Decisions by outcome: an insured one was taken while Valkey did not answer in time.
        decisions: await metricLines('sluice_decisions_total'),
      }),
    );
  } finally {
    await gateway?.proc.stop();
    await relay.stop();
  }
}

await main();
