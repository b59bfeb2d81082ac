import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { CLIENT_KINDS } from '../store/index.js';
import type { ClientKind } from '../store/index.js';
import { startInstance, stopInstance } from '../valkey/embedded.js';
import { runDir } from '../valkey/paths.js';
import { freeLoopbackPort } from '../valkey/ports.js';
import { spawnBenchRelay, spawnSluice } from './processes.js';
import { eventPool, preload } from './run/event-pool.js';
import { writeResult } from './results.js';
import type { SluiceProcess } from './processes.js';
import { median, minMax, shuffled, stddev } from './stats.js';
import { BENCH_ADMIN_TOKEN } from './run/gateway-config.js';

export interface GatewayBenchOptions {
  durationSec: number;
  warmupSec: number;
  connections: number;
  rounds: number;
  clients: ClientKind[];
  /** Distinct client identities in the load. */
  identities: number;
  outDir: string;
  seed: number;
}

type ArmKind = 'off' | 'on' | 'reject-block' | 'reject-noblock';

interface Arm {
  name: string;
  kind: ArmKind;
  client: ClientKind;
  gateway?: SluiceProcess;
}

export interface RunSample {
  arm: string;
  round: number;
  seconds: number;
  requests: number;
  ok2xx: number;
  limited429: number;
  otherNon2xx: number;
  errors: number;
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  failed: boolean;
}

/** 90% of requests come from clients already far over their limit. */
const FLOOD_SHARE = 0.9;

function gatewayConfig(arm: Arm, valkeyPort: number, relayUrl: string, identities: number) {
  const floodKeys = Object.fromEntries(
    Array.from({ length: identities }, (_, i) => [`flood-${i}`, 'flood']),
  );
  const goodKeys = Object.fromEntries(
    Array.from({ length: identities }, (_, i) => [`good-${i}`, 'default']),
  );
  return {
    listen: { port: 0 },
    admin: { port: 0, token: BENCH_ADMIN_TOKEN },
    valkey: { client: arm.client, nodes: [`127.0.0.1:${valkeyPort}`], commandTimeoutMs: 1000 },
    upstreams: [{ id: 'relay-a', url: relayUrl }],
    // The load generator is the only peer; it names clients in X-Forwarded-For.
    trustedProxies: ['127.0.0.1'],
    logging: { level: 'warn' },
    workers: 1,
    quotas: {
      enabled: arm.kind !== 'off',
      keyPrefix: `bench-${Date.now().toString(36)}-${arm.name.replace(/[^a-z0-9]/gi, '')}`,
      inMemoryBlock: arm.kind !== 'reject-noblock',
      tiers: {
        // Large enough that the accepted path never hits the limit.
        default: { write: { points: 1_000_000_000, windowSec: 3600 } },
        flood: { write: { points: 1, windowSec: 3600 } },
      },
      apiKeys: { ...floodKeys, ...goodKeys },
    },
  };
}

async function load(arm: Arm, opts: GatewayBenchOptions, bodies: string[], seconds: number) {
  let n = 0;
  const rejecting = arm.kind === 'reject-block' || arm.kind === 'reject-noblock';
  const result = await autocannon({
    url: arm.gateway!.url,
    connections: opts.connections,
    duration: seconds,
    requests: [
      {
        method: 'POST',
        path: '/events',
        setupRequest: (req) => {
          const i = n++;
          const who = (i * 2654435761) % opts.identities; // spread clients evenly, no RNG cost
          const headers: Record<string, string> = { 'content-type': 'application/json' };
          if (rejecting) {
            headers['x-api-key'] = (i % 10) / 10 < FLOOD_SHARE ? `flood-${who}` : `good-${who}`;
          } else {
            headers['x-forwarded-for'] = `10.${(who >> 16) & 255}.${(who >> 8) & 255}.${who & 255}`;
          }
          return { ...req, headers, body: bodies[i % bodies.length]! };
        },
      },
    ],
  });
  return result;
}

function sample(arm: Arm, round: number, r: autocannon.Result): RunSample {
  const codes = r.statusCodeStats as unknown as Record<string, { count: number }>;
  const count = (code: string) => codes[code]?.count ?? 0;
  const limited429 = count('429');
  const ok2xx = r['2xx'];
  const requests = ok2xx + r.non2xx;
  const otherNon2xx = r.non2xx - limited429;
  const expectRejections = arm.kind === 'reject-block' || arm.kind === 'reject-noblock';
  return {
    arm: arm.name,
    round,
    seconds: r.duration,
    requests,
    ok2xx,
    limited429,
    otherNon2xx,
    errors: r.errors + r.timeouts,
    reqPerSec: requests / r.duration,
    p50Ms: r.latency.p50,
    p99Ms: r.latency.p99,
    // A run with errors, unexpected statuses, or 429s where none belong is not used.
    failed: r.errors + r.timeouts > 0 || otherNon2xx > 0 || (!expectRejections && limited429 > 0),
  };
}

export interface ArmSummary {
  arm: string;
  kind: ArmKind;
  client: ClientKind;
  runs: number;
  failedRuns: number;
  reqPerSec: number;
  reqPerSecMin: number;
  reqPerSecMax: number;
  reqPerSecStddev: number;
  p50Ms: number;
  p99Ms: number;
  rejectedShare: number;
}

export function summarise(
  arms: { name: string; kind: ArmKind; client: ClientKind }[],
  samples: RunSample[],
): ArmSummary[] {
  return arms.map((arm) => {
    const all = samples.filter((s) => s.arm === arm.name);
    const ok = all.filter((s) => !s.failed);
    const rates = ok.map((s) => s.reqPerSec);
    const [lo, hi] = rates.length ? minMax(rates) : [NaN, NaN];
    return {
      arm: arm.name,
      kind: arm.kind,
      client: arm.client,
      runs: all.length,
      failedRuns: all.length - ok.length,
      reqPerSec: median(rates),
      reqPerSecMin: lo,
      reqPerSecMax: hi,
      reqPerSecStddev: stddev(rates),
      p50Ms: median(ok.map((s) => s.p50Ms)),
      p99Ms: median(ok.map((s) => s.p99Ms)),
      rejectedShare: median(ok.map((s) => s.limited429 / Math.max(1, s.requests))),
    };
  });
}

export async function runGatewayBench(
  opts: GatewayBenchOptions,
  log: (line: string) => void,
): Promise<{ samples: RunSample[]; summary: ArmSummary[]; file: string }> {
  const env = { ...process.env, SLUICE_RUN_DIR: path.join(runDir(), 'bench-gateway') };
  const quiet = { info: () => undefined, warn: log };
  const valkey = { topology: 'standalone' as const, port: await freeLoopbackPort() };
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'sluice-bench-relay-'));
  const arms: Arm[] = [
    { name: 'quotas off', kind: 'off', client: 'ioredis' },
    ...opts.clients.map((client) => ({
      name: `quotas on, ${client}`,
      kind: 'on' as const,
      client,
    })),
    ...opts.clients.flatMap((client) => [
      { name: `90% over limit, ${client}, in-memory block`, kind: 'reject-block' as const, client },
      {
        name: `90% over limit, ${client}, no in-memory block`,
        kind: 'reject-noblock' as const,
        client,
      },
    ]),
  ];
  const started: SluiceProcess[] = [];
  const samples: RunSample[] = [];
  try {
    await startInstance(valkey, quiet, env);
    const relay = await spawnBenchRelay(dataDir, '1GiB', env);
    started.push(relay);
    const configDir = mkdtempSync(path.join(os.tmpdir(), 'sluice-bench-gw-'));
    for (const arm of arms) {
      const file = path.join(configDir, `${arm.name.replace(/[^a-z0-9]+/gi, '-')}.json`);
      writeFileSync(
        file,
        JSON.stringify(gatewayConfig(arm, valkey.port, relay.url, opts.identities)),
      );
      arm.gateway = await spawnSluice(['gateway', '--config', file], { env });
      started.push(arm.gateway);
    }
    const bodies = eventPool(2000, opts.seed);
    // The relay holds the pool before any arm runs, so every measured write is answered after
    // its id check: the relay's share of the CPU stays small and equal across arms.
    await preload(relay.url, bodies);
    log(`warm-up: ${opts.warmupSec}s per arm (not recorded)`);
    for (const arm of arms) await load(arm, opts, bodies, opts.warmupSec);
    for (let round = 1; round <= opts.rounds; round++) {
      for (const arm of shuffled(arms, opts.seed + round)) {
        const s = sample(arm, round, await load(arm, opts, bodies, opts.durationSec));
        samples.push(s);
        log(
          `round ${round}/${opts.rounds} ${arm.name}: ${s.reqPerSec.toFixed(0)} req/s, p50 ${s.p50Ms} ms, p99 ${s.p99Ms} ms` +
            (s.limited429 ? `, ${((100 * s.limited429) / s.requests).toFixed(0)}% 429` : '') +
            (s.failed ? ' FAILED' : ''),
        );
      }
    }
  } finally {
    await Promise.allSettled(started.map((p) => p.stop()));
    await stopInstance(valkey, quiet, env);
    rmSync(dataDir, { recursive: true, force: true });
  }
  const summary = summarise(arms, samples);
  const file = writeResult(opts.outDir, 'gateway-bench.json', 'gateway-bench', {
    options: opts,
    note: 'load generator, gateway, relay and Valkey share this machine; compare ratios within this run',
    samples,
    summary,
  });
  return { samples, summary, file };
}

export function formatGatewaySummary(summary: ArmSummary[]): string {
  const off = summary.find((s) => s.kind === 'off');
  const accepted = (client: ClientKind) =>
    summary.find((s) => s.kind === 'on' && s.client === client);
  const rows = summary.map((s) => {
    const base = s.kind === 'on' ? off : s.kind === 'off' ? undefined : accepted(s.client);
    const ratio = base ? (s.reqPerSec / base.reqPerSec).toFixed(2) : '-';
    const vs = s.kind === 'on' ? 'vs quotas off' : s.kind === 'off' ? '' : 'vs accepted path';
    const added = s.kind === 'on' && off ? (s.p99Ms - off.p99Ms).toFixed(1) : '-';
    return `| ${s.arm} | ${s.reqPerSec.toFixed(0)} (${s.reqPerSecMin.toFixed(0)}-${s.reqPerSecMax.toFixed(0)}, sd ${s.reqPerSecStddev.toFixed(0)}) | ${s.p50Ms} | ${s.p99Ms} | ${added} | ${(100 * s.rejectedShare).toFixed(0)}% | ${ratio} ${vs} | ${s.failedRuns}/${s.runs} |`;
  });
  return [
    '| arm | req/s median (min-max, sd) | p50 ms | p99 ms | p99 added ms | 429 share | ratio | failed runs |',
    '| --- | --- | --- | --- | --- | --- | --- | --- |',
    ...rows,
  ].join('\n');
}

export const ALL_CLIENTS = CLIENT_KINDS;
