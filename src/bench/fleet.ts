/**
 * `sluice bench fleet`: a fleet that routes around a sick node (issue 20, part 3).
 *
 * Per routing mode (sticky, round-robin, headroom), in one command: three reference relays
 * draining 1 MiB/s each, a lead-law feed beside each (target = idle + 64 MiB), two gateways
 * with pressure on and per-client quotas, six writers over HTTP (POST /events, 16 KiB
 * events) offering 0.9 x the healthy fleet's sustainable rate; mid-run one node's drain is
 * cut to a quarter (the relay's POST /admin/drain). Reported per mode: what the fleet accepts
 * once the degradation has settled, against what it can still sustain, and how much of that
 * went into memory rather than through the drains; the sick node's peak memory / target; and
 * every answer a client got other than 2xx and 429.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { initNostrWasm } from 'nostr-wasm';
import { generateSecretKey } from 'nostr-tools/pure';
import type { RoutingMode } from '../config/schema.js';
import { rendezvousScore } from '../gateway/upstreams.js';
import { startFeed, startGateway, startRelay } from '../harness/processes.js';
import type { SluiceProcess } from '../harness/processes.js';
import { makeIdentity } from '../quota/policy.js';
import type { ClientKind } from '../store/options.js';
import { BENCH_ADMIN_TOKEN } from './run/gateway-config.js';
import { postEvent } from './run/post-event.js';

const MiB = 1024 * 1024;
const NODES = ['relay-a', 'relay-b', 'relay-c'] as const;
/** The node whose drain is cut. */
const SICK = 2;
const KEY_SALT = 'sluice-bench-fleet';
const RELAY_ADMIN_TOKEN = 'bench-relay-admin-token-0123456789';
/** Requests one writer may have open; an offer beyond it is counted as not sent. */
const MAX_IN_FLIGHT_PER_WRITER = 64;
const SAMPLE_MS = 500;

export interface FleetBenchOptions {
  modes: RoutingMode[];
  /** Seconds per mode, degradation included. */
  seconds: number;
  /** When the sick node's drain is cut (seconds into the mode). */
  degradeAtSec: number;
  /** Seconds after the cut before the measured window opens (the law's reaction). */
  settleSec: number;
  drainBytesPerSec: number;
  /** The sick node's drain after the cut, as a share of the others'. */
  degradeFactor: number;
  eventContentBytes: number;
  /** Offered load as a share of the healthy fleet's sustainable rate. */
  offeredShare: number;
  writers: number;
  /** Each writer's quota (per second) as a multiple of what it offers. */
  quotaFactor: number;
  /** Each writer's quota per second, overriding quotaFactor. */
  quotaPerSec?: number;
  headroomBytes: number;
  tickMs: number;
  valkey: { client: ClientKind; nodes: string[] };
}

export const FLEET_DEFAULTS: Omit<FleetBenchOptions, 'valkey'> = {
  modes: ['sticky', 'round-robin', 'headroom'],
  seconds: 90,
  degradeAtSec: 20,
  settleSec: 20,
  drainBytesPerSec: MiB,
  degradeFactor: 0.25,
  eventContentBytes: 16 * 1024,
  offeredShare: 0.9,
  writers: 6,
  quotaFactor: 1.25,
  headroomBytes: 64 * MiB,
  tickMs: 500,
};

export interface ClientAnswers {
  /** Offers made (each a POST /events, or not sent past the in-flight bound). */
  offered: number;
  ok2xx: number;
  limited429: number;
  /** 503 at multiplier 0 (the node has no quota left for anyone). */
  shed503: number;
  /** Any other status, by status. */
  other: Record<string, number>;
  /** Connection errors and timeouts. */
  errors: number;
  /** Sent again once, after a kept-alive socket closed under it (not an error). */
  retriedOnNewSocket: number;
  /** Offers not sent: the writer already had MAX_IN_FLIGHT_PER_WRITER requests open. */
  notSent: number;
  /** The first few distinct answers other than 2xx and 429 (status and body, or the error). */
  examples: string[];
}

export interface FleetSample {
  t: number;
  /** Per node: memory / target, backlog bytes, multiplier seen by gateway 1. */
  u: number[];
  backlogBytes: number[];
  m: number[];
  acceptedPerSec: number;
}

export interface FleetModeResult {
  mode: RoutingMode;
  /** Target = idle + this (bytes). */
  headroomBytes: number;
  /** The sick node's drain after the cut, as a share of the others'. */
  degradeFactor: number;
  eventBytes: number;
  offeredPerSec: number;
  quotaPerSecPerWriter: number;
  sustainableBeforePerSec: number;
  sustainableAfterPerSec: number;
  /** The measured window: from degradeAt + settle to the end (seconds into the mode). */
  window: { from: number; to: number };
  acceptedInWindowPerSec: number;
  acceptedShareOfSustainable: number;
  /** Of what was accepted in the window, events/s that stayed in memory (backlog growth). */
  intoMemoryPerSec: number;
  /** Samples lost to a slow answer (the machine is shared). */
  missedSamples: number;
  /** Accepted in the window, per node (events/s, from the relays' own counters). */
  acceptedPerNodePerSec: number[];
  sickPeakOverTarget: number;
  healthyPeakOverTarget: number;
  targets: number[];
  answers: ClientAnswers;
  /** Answers other than 2xx and 429, and connection errors, all kinds together. */
  clientErrors: number;
  samples: FleetSample[];
  /** The machine's 1-minute load average as the mode started and as it ended. */
  loadAverage: [number, number];
}

interface Writer {
  from: string;
  /** The writer's own key: its events have an author of their own. */
  sk: Uint8Array;
  gateway: number;
  agent: http.Agent;
  inFlight: number;
}

/** Loopback sources whose sticky node is each node in turn: the fleet starts balanced. */
export function balancedSources(writers: number): string[] {
  const per = Math.ceil(writers / NODES.length);
  const byNode: string[][] = NODES.map(() => []);
  for (let host = 1; host < 255; host++) {
    const ip = `127.0.30.${host}`;
    const key = makeIdentity('ip', ip, 'default', KEY_SALT).key;
    let best = 0;
    for (let n = 1; n < NODES.length; n++) {
      if (rendezvousScore(NODES[n]!, key) > rendezvousScore(NODES[best]!, key)) best = n;
    }
    if (byNode[best]!.length < per) byNode[best]!.push(ip);
    if (byNode.every((l) => l.length >= per)) break;
  }
  // Writer i is sticky to node i mod 3.
  return Array.from(
    { length: writers },
    (_, i) => byNode[i % NODES.length]![Math.floor(i / NODES.length)]!,
  );
}

/**
 * POST one event from the writer's address over its kept-alive connection. A socket the
 * gateway closed as it was reused is tried once more on a new one, as HTTP clients do: an
 * event is idempotent (a second copy is answered duplicate), and nothing reached the gateway.
 */
async function post(
  url: string,
  body: string,
  writer: Writer,
): Promise<{ status: number; problem: string; retried: boolean }> {
  const once = async () => {
    const answer = await postEvent(url, body, writer.from, {
      agent: writer.agent,
      timeoutMs: 30_000,
    });
    return { ...answer, problem: answer.error ?? answer.body };
  };
  const first = await once();
  if (!first.reusedSocketReset) return { ...first, retried: false };
  return { ...(await once()), retried: true };
}

async function getJson<T>(url: string, headers: Record<string, string> = {}): Promise<T> {
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(10_000) });
  if (!res.ok) throw new Error(`${url} answered ${res.status}`);
  return (await res.json()) as T;
}

interface RelayStatsView {
  rssAnonBytes: number;
  backlogBytes: number;
  eventsAccepted: number;
}

/** Wait (at most 30 s) until every gateway holds every node at multiplier 1 from its feed. */
async function untilAllTrusted(gateways: { admin: string }[]): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const views = await Promise.all(
      gateways.map((g) =>
        getJson<{ nodes: Record<string, { multiplier: number }> }>(
          `${g.admin}/admin/flow-control`,
          { authorization: `Bearer ${BENCH_ADMIN_TOKEN}` },
        ),
      ),
    );
    if (views.every((v) => NODES.every((id) => v.nodes[id]?.multiplier === 1))) return;
    if (Date.now() > deadline) {
      throw new Error(`the gateways did not reach multiplier 1 on every node within 30 s`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** One routing mode, on fresh relays, feeds and gateways. */
export async function runFleetMode(
  mode: RoutingMode,
  opts: Omit<FleetBenchOptions, 'modes'>,
  env: NodeJS.ProcessEnv,
  log: (line: string) => void,
): Promise<FleetModeResult> {
  const started: SluiceProcess[] = [];
  const dirs: string[] = [];
  const loadAtStart = os.loadavg()[0]!;
  const scratch = (prefix: string) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
    dirs.push(dir);
    return dir;
  };
  const relayEnv = { ...env, SLUICE_RELAY_ADMIN_TOKEN: RELAY_ADMIN_TOKEN };
  const writers: Writer[] = [];
  try {
    const relays = await Promise.all(
      NODES.map((nodeId) =>
        startRelay({ nodeId, drainBytesPerSec: opts.drainBytesPerSec, env: relayEnv }),
      ),
    );
    started.push(...relays);
    const idle = await Promise.all(
      relays.map(async (r) => (await getJson<RelayStatsView>(`${r.url}/stats`)).rssAnonBytes),
    );
    const targets = idle.map((i) => i + opts.headroomBytes);
    const feeds = await Promise.all(
      relays.map((r, i) =>
        startFeed({
          nodeId: NODES[i]!,
          relayUrl: r.url,
          targetBytes: targets[i]!,
          tickMs: opts.tickMs,
          law: 'lead',
          valkey: { ...opts.valkey, mode: 'standalone' },
          env,
        }),
      ),
    );
    started.push(...feeds);

    // Events: 16 KiB of content, signed as they go (libsecp256k1 in WebAssembly), each writer
    // with a key of its own: one author for all six would put the whole fleet under that
    // author's quota (measured: 119 events/s accepted with m = 1 on every node).
    const nw = await initNostrWasm();
    const filler = 'x'.repeat(opts.eventContentBytes);
    let serial = 0;
    const nextEvent = (sk: Uint8Array): string => {
      const event = {
        kind: 1,
        created_at: Math.floor(Date.now() / 1000),
        tags: [['n', `${mode}-${serial++}`]],
        content: filler,
        pubkey: '',
        id: '',
        sig: '',
      };
      nw.finalizeEvent(event, sk);
      return JSON.stringify(event);
    };
    const eventBytes = Buffer.byteLength(nextEvent(generateSecretKey()));
    const healthyPerSec = (NODES.length * opts.drainBytesPerSec) / eventBytes;
    const sustainableAfterPerSec =
      ((NODES.length - 1 + opts.degradeFactor) * opts.drainBytesPerSec) / eventBytes;
    const offeredPerSec = opts.offeredShare * healthyPerSec;
    const perWriter = offeredPerSec / opts.writers;
    const quotaPerSecPerWriter =
      opts.quotaPerSec ?? Math.max(1, Math.round(perWriter * opts.quotaFactor));

    const configDir = scratch('sluice-fleet-gw-');
    const gateways: { url: string; admin: string }[] = [];
    // One prefix for both gateways: computed per gateway, the two would not share counters.
    const keyPrefix = `fleet-${mode}-${Date.now()}`;
    for (let g = 0; g < 2; g++) {
      const gw = await startGateway(
        {
          listen: { port: 0 },
          admin: { port: 0, token: BENCH_ADMIN_TOKEN },
          valkey: { client: opts.valkey.client, mode: 'standalone', nodes: opts.valkey.nodes },
          upstreams: NODES.map((id, i) => ({ id, url: relays[i]!.url })),
          routing: mode,
          logging: { level: 'warn' },
          workers: 1,
          identity: { keySalt: KEY_SALT },
          limits: { maxBodyBytes: 4 * eventBytes },
          quotas: {
            keyPrefix,
            gateways: 2,
            tiers: { default: { write: { points: quotaPerSecPerWriter, windowSec: 1 } } },
          },
          pressure: {
            enabled: true,
            evaluateMs: 100,
            staleAfterMs: 3 * opts.tickMs,
            holdMs: 2000,
            ...(mode === 'headroom' ? { drain: { enabled: true } } : {}),
          },
        },
        path.join(configDir, `gw${g}.json`),
        { env },
      );
      started.push(gw.proc);
      gateways.push({ url: gw.url, admin: gw.adminUrl });
    }

    const answers: ClientAnswers = {
      offered: 0,
      ok2xx: 0,
      limited429: 0,
      shed503: 0,
      other: {},
      errors: 0,
      retriedOnNewSocket: 0,
      notSent: 0,
      examples: [],
    };
    for (const [i, from] of balancedSources(opts.writers).entries()) {
      writers.push({
        from,
        sk: generateSecretKey(),
        gateway: i % gateways.length,
        agent: new http.Agent({ keepAlive: true, maxSockets: MAX_IN_FLIGHT_PER_WRITER }),
        inFlight: 0,
      });
    }
    let accepted = 0;
    const record = ({ status, problem, retried }: Awaited<ReturnType<typeof post>>) => {
      if (retried) answers.retriedOnNewSocket++;
      if (status >= 200 && status < 300) {
        answers.ok2xx++;
        accepted++;
        return;
      }
      if (status === 429) {
        answers.limited429++;
        return;
      }
      if (status === 503 && problem.includes('multiplier')) answers.shed503++;
      else if (status === 0) answers.errors++;
      else answers.other[status] = (answers.other[status] ?? 0) + 1;
      const example = `${status} ${problem.slice(0, 300)}`;
      if (answers.examples.length < 5 && !answers.examples.includes(example)) {
        answers.examples.push(example);
      }
    };

    // Writers start once both gateways trust every feed (a gateway starts at the safe value).
    await untilAllTrusted(gateways);

    // Open loop: each writer offers at its own pace, whatever the answers take.
    let stop = false;
    const t0 = Date.now();
    const pending = new Set<Promise<void>>();
    const offer = (w: Writer) => {
      answers.offered++;
      if (w.inFlight >= MAX_IN_FLIGHT_PER_WRITER) {
        answers.notSent++;
        return;
      }
      w.inFlight++;
      const p = post(`${gateways[w.gateway]!.url}/events`, nextEvent(w.sk), w).then((r) => {
        w.inFlight--;
        record(r);
      });
      pending.add(p);
      void p.finally(() => pending.delete(p));
    };
    const pacing = writers.map(async (w, i) => {
      const period = 1000 / perWriter;
      // Staggered, so the six writers do not offer in step.
      let next = t0 + (period * i) / writers.length;
      while (!stop) {
        const wait = next - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        if (stop) break;
        offer(w);
        next += period;
      }
    });

    const samples: FleetSample[] = [];
    const acceptedAt: { t: number; perNode: number[] }[] = [];
    let degraded = false;
    let missedSamples = 0;
    let lastAccepted = 0;
    let lastAt = t0;
    while (Date.now() - t0 < opts.seconds * 1000) {
      await new Promise((r) => setTimeout(r, SAMPLE_MS));
      const t = (Date.now() - t0) / 1000;
      if (!degraded && t >= opts.degradeAtSec) {
        degraded = true;
        const res = await fetch(`${relays[SICK]!.url}/admin/drain`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            authorization: `Bearer ${RELAY_ADMIN_TOKEN}`,
          },
          body: JSON.stringify({
            bytesPerSec: Math.round(opts.drainBytesPerSec * opts.degradeFactor),
          }),
        });
        if (!res.ok) throw new Error(`POST /admin/drain answered ${res.status}`);
        log(`${mode}: ${NODES[SICK]}'s drain cut to ${opts.degradeFactor} at ${t.toFixed(1)} s`);
      }
      let stats: RelayStatsView[];
      let flow: { nodes: Record<string, { multiplier: number }> };
      try {
        [stats, flow] = await Promise.all([
          Promise.all(relays.map((r) => getJson<RelayStatsView>(`${r.url}/stats`))),
          getJson<{ nodes: Record<string, { multiplier: number }> }>(
            `${gateways[0]!.admin}/admin/flow-control`,
            { authorization: `Bearer ${BENCH_ADMIN_TOKEN}` },
          ),
        ]);
      } catch (err) {
        // A slow answer on a busy machine loses one sample, not the run.
        missedSamples++;
        log(`${mode}: a sample was lost (${(err as Error).message})`);
        continue;
      }
      const now = Date.now();
      samples.push({
        t: Number(((now - t0) / 1000).toFixed(2)),
        u: stats.map((s, i) => Number((s.rssAnonBytes / targets[i]!).toFixed(4))),
        backlogBytes: stats.map((s) => s.backlogBytes),
        m: NODES.map((id) => flow.nodes[id]!.multiplier),
        acceptedPerSec: Number((((accepted - lastAccepted) * 1000) / (now - lastAt)).toFixed(1)),
      });
      acceptedAt.push({ t: (now - t0) / 1000, perNode: stats.map((s) => s.eventsAccepted) });
      lastAccepted = accepted;
      lastAt = now;
    }
    stop = true;
    await Promise.all(pacing);
    await Promise.all([...pending]);

    // The measured window, from the relays' own counters and backlogs.
    const from = opts.degradeAtSec + opts.settleSec;
    const first = acceptedAt.findIndex((a) => a.t >= from);
    if (first < 0) throw new Error('no sample inside the measured window: run longer');
    const open = acceptedAt[first]!;
    const close = acceptedAt[acceptedAt.length - 1]!;
    const span = close.t - open.t;
    const perNode = close.perNode.map((n, i) => (n - open.perNode[i]!) / span);
    const acceptedInWindowPerSec = perNode.reduce((a, b) => a + b, 0);
    const backlog = (k: number) => samples[k]!.backlogBytes.reduce((a, b) => a + b, 0);
    const intoMemoryPerSec = (backlog(samples.length - 1) - backlog(first)) / eventBytes / span;
    const peak = (i: number) => Math.max(...samples.map((s) => s.u[i]!));
    const otherCount = Object.values(answers.other).reduce((a, b) => a + b, 0);
    const result: FleetModeResult = {
      mode,
      headroomBytes: opts.headroomBytes,
      degradeFactor: opts.degradeFactor,
      eventBytes,
      offeredPerSec,
      quotaPerSecPerWriter,
      sustainableBeforePerSec: healthyPerSec,
      sustainableAfterPerSec,
      window: { from: Number(open.t.toFixed(1)), to: Number(close.t.toFixed(1)) },
      acceptedInWindowPerSec,
      acceptedShareOfSustainable: acceptedInWindowPerSec / sustainableAfterPerSec,
      intoMemoryPerSec,
      acceptedPerNodePerSec: perNode,
      missedSamples,
      sickPeakOverTarget: peak(SICK),
      healthyPeakOverTarget: Math.max(...NODES.map((_, i) => (i === SICK ? 0 : peak(i)))),
      targets,
      answers,
      clientErrors: answers.shed503 + otherCount + answers.errors,
      samples,
      loadAverage: [loadAtStart, os.loadavg()[0]!],
    };
    log(
      `${mode}: accepted ${result.acceptedShareOfSustainable.toFixed(2)} of the remaining ` +
        `sustainable rate (${acceptedInWindowPerSec.toFixed(1)} of ${sustainableAfterPerSec.toFixed(1)} events/s), ` +
        `sick peak ${result.sickPeakOverTarget.toFixed(2)} x target, ${result.clientErrors} client errors`,
    );
    return result;
  } finally {
    for (const w of writers) w.agent.destroy();
    await Promise.allSettled(started.reverse().map((p) => p.stop()));
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }
}

/** Why these durations leave no window to measure (at least 5 s after the settling). */
export function fleetWindowProblem(
  opts: Pick<FleetBenchOptions, 'seconds' | 'degradeAtSec' | 'settleSec'>,
): string | undefined {
  if (opts.degradeAtSec + opts.settleSec + 5 <= opts.seconds) return undefined;
  return `--seconds ${opts.seconds} leaves no measured window after the cut at ${opts.degradeAtSec} s and ${opts.settleSec} s to settle`;
}

export async function runFleetBench(
  opts: FleetBenchOptions,
  env: NodeJS.ProcessEnv,
  log: (line: string) => void,
): Promise<FleetModeResult[]> {
  const problem = fleetWindowProblem(opts);
  if (problem) throw new Error(problem);
  const results: FleetModeResult[] = [];
  for (const mode of opts.modes) results.push(await runFleetMode(mode, opts, env, log));
  return results;
}

const fixed = (x: number, d = 2) => x.toFixed(d);

/** The table of docs/BENCHMARKS.md. */
export function formatFleetTable(results: FleetModeResult[]): string {
  const rows = [
    '| headroom | sick drain | routing | accepted / remaining sustainable | of which into memory | through the drains | accepted per node (a / b / sick c), events/s | sick node peak / target | healthy peak / target | 429 | client errors other than 429 | offers not sent (writer at its in-flight bound) |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const r of results) {
    const other = Object.entries(r.answers.other).map(([s, n]) => `${n} x ${s}`);
    if (r.answers.shed503) other.push(`${r.answers.shed503} x 503 at m = 0`);
    if (r.answers.errors) other.push(`${r.answers.errors} connection errors`);
    rows.push(
      `| ${fixed(r.headroomBytes / MiB, 0)} MiB | ${r.degradeFactor} | ${r.mode} | ${fixed(r.acceptedShareOfSustainable)} (${fixed(r.acceptedInWindowPerSec, 1)} of ${fixed(r.sustainableAfterPerSec, 1)}/s) | ${fixed(r.intoMemoryPerSec / r.sustainableAfterPerSec)} | ${fixed((r.acceptedInWindowPerSec - r.intoMemoryPerSec) / r.sustainableAfterPerSec)} | ${r.acceptedPerNodePerSec.map((x) => fixed(x, 1)).join(' / ')} | ${fixed(r.sickPeakOverTarget)} | ${fixed(r.healthyPeakOverTarget)} | ${r.answers.limited429} | ${r.clientErrors}${other.length ? ` (${other.join(', ')})` : ''} | ${r.answers.notSent} |`,
    );
  }
  return rows.join('\n');
}
