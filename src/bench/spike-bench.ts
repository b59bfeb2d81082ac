/**
 * Sudden spikes (issue 20, part 2): a reference relay under a steady write load near what it
 * drains, its feed (lead law) and two gateways; then memory jumps, either by the relay's
 * own /admin/spike (a store that balloons) or by a burst of large events at the client's
 * full quota. Measured per trial: the reaction time (spike start -> both gateways applying a
 * lower multiplier than before, polled every 10 ms from their /admin/flow-control) and the
 * peak of the relay's memory over its target (RssAnon, read from /proc every 10 ms). Each
 * arm runs with the feed's fast tick on (50 ms from 0.7 x target) and off (500 ms always).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setImmediate, setTimeout as sleep } from 'node:timers/promises';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import type { ClientKind, NodeAddress } from '../store/index.js';
import { startFeed, startGateway, startRelay } from '../harness/processes.js';
import type { SluiceProcess } from '../harness/processes.js';
import { parsePrometheusValue, processSampler } from '../pressure/feed/samplers.js';
import { withBenchValkey } from './own-valkey.js';
import { BENCH_ADMIN_TOKEN } from './run/gateway-config.js';
import { median } from './stats.js';

const MiB = 1024 * 1024;
const RELAY_ADMIN_TOKEN = 'bench-relay-admin-token-0123456789';
/** What a signed kind-1 event adds to its content on the wire (id, pubkey, sig, tags). */
const EVENT_OVERHEAD = 400;
const POLL_MS = 10;

export type SpikeVariant = 'spike' | 'burst';
export type Pace = 'fast' | 'slow';

export interface SpikeBenchOptions {
  variants: SpikeVariant[];
  paces: Pace[];
  trials: number;
  drainBytesPerSec: number;
  /** Target = the idle relay's memory + this. */
  headroomBytes: number;
  /** Before each arm's first trial a held allocation lifts memory to this share of target. */
  level: number;
  /** spike: bytes = this share of what is left below the target at the spike. */
  spikeShare: number;
  /** The steady writers' events, and their rate as a share of what the relay drains. */
  eventContentBytes: number;
  steadyShare: number;
  /** burst: content of each large event, and how long the burst lasts. */
  burstContentBytes: number;
  burstSec: number;
  /** Seconds watched after each spike or burst starts. */
  watchSec: number;
  tickMs: number;
  fastTickMs: number;
  /** What the feed samples: the relay's process from /proc, or the relay's own metric. */
  feedSource: 'pid' | 'relay';
  valkeyClient: ClientKind;
  /** A standalone Valkey to use; one is started on a free port when absent. */
  valkey?: NodeAddress;
}

export interface Trial {
  /** u and each gateway's multiplier just before the spike. */
  uBefore: number;
  mBefore: number[];
  /** The feed's tick when the spike started (ms). */
  tickBeforeMs: number;
  /** Spike start -> both gateways below their multiplier before; null: never within the watch. */
  reactionMs: number | null;
  /** ... and each gateway on its own. */
  gatewayReactionMs: (number | null)[];
  /** Spike start -> memory up by 5% of the target (what the relay took to allocate or admit). */
  riseMs: number | null;
  mAfter: number;
  peakOverTarget: number;
  spikeBytes: number;
}

export interface ArmResult {
  variant: SpikeVariant;
  pace: Pace;
  targetBytes: number;
  idleBytes: number;
  trials: Trial[];
  emergencyEntries: number;
  /** The feed's own counters over the arm: how hard the fast tick worked, and Valkey's share. */
  feedSamplesPerSec: number;
  feedPublishesPerSec: number;
  writes: {
    ok: number;
    limited429: number;
    other: number;
    errors: number;
    otherStatuses: Record<string, number>;
  };
  seconds: number;
  /**
   * Over the whole arm, every 100 ms (of the 10 ms polls): seconds since the arm started,
   * memory / target, and the multiplier each gateway applied. `marks`: each trial's start.
   */
  series: { t: number[]; u: number[]; m: number[]; m2: number[] };
  marks: { t: number; text: string }[];
}

/** One poll in ten (at most one per 100 ms) of the 10 ms series, t in seconds from `from`. */
export function thinSeries(
  series: { t: number; bytes: number; m: number[] }[],
  from: number,
  target: number,
  everyMs = 100,
): ArmResult['series'] {
  const out: ArmResult['series'] = { t: [], u: [], m: [], m2: [] };
  let last = -Infinity;
  for (const s of series) {
    if (s.t - last < everyMs) continue;
    last = s.t;
    out.t.push(Number(((s.t - from) / 1000).toFixed(3)));
    out.u.push(Number((s.bytes / target).toFixed(4)));
    out.m.push(s.m[0]!);
    out.m2.push(s.m[1] ?? s.m[0]!);
  }
  return out;
}

/** A request the bench waits no longer for: its status is then 0, as for a failed one. */
const REQUEST_TIMEOUT_MS = 30_000;

function post(url: string, body: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        localAddress: '127.0.0.3',
        agent: false,
        timeout: REQUEST_TIMEOUT_MS,
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
        // A response cut off before its end never ends: it counts as failed.
        res.on('close', () => resolve(res.complete ? (res.statusCode ?? 0) : 0));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', () => resolve(0));
    req.end(body);
  });
}

async function multiplier(adminUrl: string): Promise<number> {
  const res = await fetch(`${adminUrl}/admin/flow-control`, {
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    headers: { authorization: `Bearer ${BENCH_ADMIN_TOKEN}` },
  });
  const body = (await res.json()) as { nodes: Record<string, { multiplier: number }> };
  return body.nodes['relay-a']!.multiplier;
}

async function feedCounters(metricsUrl: string) {
  const res = await fetch(metricsUrl, { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
  const text = await res.text();
  const value = (name: string, labels?: string) => parsePrometheusValue(text, name, labels) ?? 0;
  return {
    samples: value('sluice_feed_samples_total'),
    publishes: value('sluice_feed_publishes_total'),
    tickMs: 1000 * value('sluice_feed_tick_seconds'),
    emergencies: value('sluice_feed_emergency_transitions_total', '{to="emergency"}'),
  };
}

/** One arm: fresh relay, feed and gateways; steady writers; `trials` spikes or bursts. */
async function runArm(
  variant: SpikeVariant,
  pace: Pace,
  o: SpikeBenchOptions,
  valkey: NodeAddress,
  env: NodeJS.ProcessEnv,
  log: (line: string) => void,
): Promise<ArmResult> {
  const started: SluiceProcess[] = [];
  const configDir = mkdtempSync(path.join(os.tmpdir(), 'sluice-spike-gw-'));
  const relayEnv = { ...env, SLUICE_RELAY_ADMIN_TOKEN: RELAY_ADMIN_TOKEN };
  let stop = false;
  const writers: Promise<void>[] = [];
  try {
    // A data directory of its own, removed when it stops.
    const relay = await startRelay({
      nodeId: 'relay-a',
      drainBytesPerSec: o.drainBytesPerSec,
      env: relayEnv,
    });
    started.push(relay);
    const memory = processSampler(relay.pid);
    const idle = (await memory.sample()).bytes;
    const target = idle + o.headroomBytes;
    const valkeyNodes = [`${valkey.host}:${valkey.port}`];
    const feed = await startFeed({
      nodeId: 'relay-a',
      ...(o.feedSource === 'pid' ? { pid: relay.pid } : { relayUrl: relay.url }),
      targetBytes: target,
      tickMs: o.tickMs,
      fastTickMs: pace === 'fast' ? o.fastTickMs : o.tickMs,
      valkey: { client: o.valkeyClient, mode: 'standalone', nodes: valkeyNodes },
      env,
    });
    started.push(feed);
    const feedMetrics = `${feed.url}/metrics`;
    const sustainablePerSec = o.drainBytesPerSec / (o.eventContentBytes + EVENT_OVERHEAD);
    const quotaPerSec = Math.round(3 * sustainablePerSec);
    const gateways: { url: string; admin: string }[] = [];
    // One prefix for both gateways: computed per gateway, the two would not share counters.
    const keyPrefix = `spike-${variant}-${pace}-${Date.now()}`;
    for (let g = 0; g < 2; g++) {
      const gw = await startGateway(
        {
          listen: { port: 0 },
          admin: { port: 0, token: BENCH_ADMIN_TOKEN },
          valkey: { client: o.valkeyClient, mode: 'standalone', nodes: valkeyNodes },
          upstreams: [{ id: 'relay-a', url: relay.url }],
          logging: { level: 'warn', requests: false },
          workers: 1,
          limits: { maxBodyBytes: 2 * (o.burstContentBytes + EVENT_OVERHEAD) },
          quotas: {
            keyPrefix,
            tiers: { default: { write: { points: quotaPerSec, windowSec: 1 } } },
          },
          pressure: { enabled: true, evaluateMs: 100, staleAfterMs: 3 * o.tickMs, holdMs: 2000 },
        },
        path.join(configDir, `gw${g}.json`),
        { env },
      );
      started.push(gw.proc);
      gateways.push({ url: gw.url, admin: gw.adminUrl });
    }

    // One client identity (127.0.0.3), its quota three times what the relay drains.
    const sk = generateSecretKey();
    const writes: ArmResult['writes'] = {
      ok: 0,
      limited429: 0,
      other: 0,
      errors: 0,
      otherStatuses: {},
    };
    const count = (status: number) => {
      if (status === 0) writes.errors++;
      else if (status >= 200 && status < 300) writes.ok++;
      else if (status === 429) writes.limited429++;
      else {
        writes.other++;
        writes.otherStatuses[status] = (writes.otherStatuses[status] ?? 0) + 1;
      }
    };
    let n = 0;
    const event = (content: string) =>
      JSON.stringify(
        finalizeEvent(
          {
            kind: 1,
            created_at: Math.floor(Date.now() / 1000),
            tags: [['n', String(n++)]],
            content,
          },
          sk,
        ),
      );
    const steadyContent = 'x'.repeat(o.eventContentBytes);
    const steadyWriters = 4;
    const steady = async (w: number) => {
      while (!stop) {
        const t0 = performance.now();
        count(await post(`${gateways[w % 2]!.url}/events`, event(steadyContent)));
        const wait = (1000 * steadyWriters) / (o.steadyShare * sustainablePerSec);
        await sleep(Math.max(0, wait - (performance.now() - t0)));
      }
    };
    for (let w = 0; w < steadyWriters; w++) writers.push(steady(w));

    // Polled every 10 ms for the whole arm: memory and what each gateway applies.
    const series: { t: number; bytes: number; m: number[] }[] = [];
    let polling = true;
    const poller = (async () => {
      while (polling) {
        const t0 = performance.now();
        try {
          const [bytes, ...m] = await Promise.all([
            memory.sample().then((s) => s.bytes),
            ...gateways.map((g) => multiplier(g.admin)),
          ]);
          series.push({ t: t0, bytes, m });
        } catch {
          // A poll that fails leaves a gap; the relay's death shows in the writers' counts.
        }
        await sleep(Math.max(0, POLL_MS - (performance.now() - t0)));
      }
    })();
    const latest = () => series.at(-1);
    const armStart = performance.now();
    const before = await feedCounters(feedMetrics);
    // The relay's heap grows under the first writes: let it settle before lifting the level.
    await sleep(5000);
    log(
      `${variant} ${pace}: idle ${(idle / MiB).toFixed(1)} MiB, target ${(target / MiB).toFixed(1)} MiB, ` +
        `u ${((latest()?.bytes ?? idle) / target).toFixed(2)} after the warm-up`,
    );

    // Pressure already up: held allocations lift memory to `level` x target, first to 0.1
    // below it (the relay's heap keeps growing under the writes for a while), then topped up
    // before each trial, so that every arm starts its trials from the same level.
    const lift = async (to: number) => {
      const gap = Math.round(to * target - (latest()?.bytes ?? idle));
      if (gap > 0.02 * target) await spikeRelay(relay.url, gap, 600_000);
    };
    if (o.level > 0) await lift(o.level - 0.1);
    const trials: Trial[] = [];
    const marks: ArmResult['marks'] = [];
    for (let i = 0; i < o.trials; i++) {
      // Signed before the clock starts: signing 120 KiB events takes the load generator time.
      const pools = variant === 'burst' ? await burstPools(o, quotaPerSec, event) : [];
      await settle(series, target, o.level, 20_000);
      if (o.level > 0) {
        await lift(o.level);
        await settle(series, target, o.level, 20_000);
      }
      const at = latest()!;
      const tickBeforeMs = (await feedCounters(feedMetrics)).tickMs;
      const startT = performance.now();
      marks.push({
        t: Number(((startT - armStart) / 1000).toFixed(2)),
        text: `${variant} ${i + 1}`,
      });
      let spikeBytes = 0;
      if (variant === 'spike') {
        spikeBytes = Math.round(o.spikeShare * Math.max(0, target - at.bytes));
        void spikeRelay(relay.url, spikeBytes, o.watchSec * 1000 - 1000).catch((err: unknown) =>
          log(`spike failed: ${(err as Error).message}`),
        );
      } else {
        void burst(gateways, o, pools, count);
      }
      await sleep(o.watchSec * 1000);
      const after = series.filter((s) => s.t >= startT);
      const firstBelow = (g: number) => {
        const hit = after.find((s) => s.m[g]! < at.m[g]!);
        return hit ? hit.t - startT : null;
      };
      const perGateway = gateways.map((_, g) => firstBelow(g));
      const both = after.find((s) => s.m.every((m, g) => m < at.m[g]!));
      const rise = after.find((s) => s.bytes >= at.bytes + 0.05 * target);
      const trial: Trial = {
        uBefore: at.bytes / target,
        mBefore: at.m,
        tickBeforeMs,
        reactionMs: both ? both.t - startT : null,
        gatewayReactionMs: perGateway,
        riseMs: rise ? rise.t - startT : null,
        mAfter: Math.min(...after.flatMap((s) => s.m)),
        peakOverTarget: Math.max(...after.map((s) => s.bytes)) / target,
        spikeBytes,
      };
      trials.push(trial);
      log(
        `${variant} ${pace} trial ${i + 1}: u ${trial.uBefore.toFixed(2)} m ${trial.mBefore.join('/')} ` +
          `tick ${tickBeforeMs} ms -> memory up after ${trial.riseMs?.toFixed(0) ?? 'never'} ms, ` +
          `reaction ${trial.reactionMs?.toFixed(0) ?? 'none'} ms, ` +
          `m ${trial.mAfter}, peak ${trial.peakOverTarget.toFixed(3)} x target`,
      );
    }
    const end = await feedCounters(feedMetrics);
    const seconds = (performance.now() - armStart) / 1000;
    polling = false;
    await poller;
    return {
      variant,
      pace,
      targetBytes: target,
      idleBytes: idle,
      trials,
      emergencyEntries: end.emergencies - before.emergencies,
      feedSamplesPerSec: (end.samples - before.samples) / seconds,
      feedPublishesPerSec: (end.publishes - before.publishes) / seconds,
      writes,
      seconds,
      series: thinSeries(series, armStart, target),
      marks,
    };
  } finally {
    stop = true;
    await Promise.allSettled(writers);
    await Promise.allSettled(started.reverse().map((p) => p.stop()));
    rmSync(configDir, { recursive: true, force: true });
  }
}

async function spikeRelay(relayUrl: string, bytes: number, holdMs: number): Promise<void> {
  const status = await post(
    `${relayUrl}/admin/spike`,
    JSON.stringify({ bytes, holdMs: Math.max(1, Math.round(holdMs)) }),
    { authorization: `Bearer ${RELAY_ADMIN_TOKEN}` },
  );
  if (status !== 200) throw new Error(`the relay refused a spike of ${bytes} bytes (${status})`);
}

/**
 * Before a trial: memory back near the arm's level (the last burst drained, the last spike
 * released) and the multipliers steady for 2.5 s; after `deadlineMs` it goes ahead.
 */
async function settle(
  series: { t: number; bytes: number; m: number[] }[],
  target: number,
  level: number,
  deadlineMs: number,
): Promise<void> {
  const from = performance.now();
  const deadline = from + deadlineMs;
  while (performance.now() < deadline) {
    await sleep(200);
    const now = performance.now();
    // Only what was seen since the call: a lift just made has not moved m yet.
    if (now - from < 2500) continue;
    const recent = series.filter((s) => s.t >= now - 2500);
    if (recent.length < 25) continue;
    const steady = recent.every((s) => s.m.join() === recent[0]!.m.join());
    const u = recent.at(-1)!.bytes / target;
    if (steady && u <= Math.max(level, 0.6) + 0.05) return;
  }
}

const BURST_WRITERS = 6;

/**
 * Enough signed large events for a burst at the full quota, one pool per writer. Signed one
 * at a time with a turn of the event loop in between: seconds of signing in one go would
 * stall the steady writers' requests (the gateway answers a request that stalls 408).
 */
async function burstPools(
  o: SpikeBenchOptions,
  quotaPerSec: number,
  event: (content: string) => string,
): Promise<string[][]> {
  const content = 'y'.repeat(o.burstContentBytes);
  const perWriter = Math.ceil((quotaPerSec * o.burstSec) / BURST_WRITERS) + 1;
  const pools: string[][] = [];
  for (let w = 0; w < BURST_WRITERS; w++) {
    const pool: string[] = [];
    for (let i = 0; i < perWriter; i++) {
      pool.push(event(content));
      await setImmediate();
    }
    pools.push(pool);
  }
  return pools;
}

/** Large events as fast as the gateways take them for burstSec (closed loop, six writers). */
async function burst(
  gateways: { url: string }[],
  o: SpikeBenchOptions,
  pools: string[][],
  count: (status: number) => void,
): Promise<void> {
  const end = performance.now() + o.burstSec * 1000;
  await Promise.all(
    pools.map(async (pool, w) => {
      let i = 0;
      while (performance.now() < end && i < pool.length) {
        const status = await post(`${gateways[w % 2]!.url}/events`, pool[i]!);
        count(status);
        // An event refused is sent again (not stored); a 429 waits a little, not a hot loop.
        if (status >= 200 && status < 300) i++;
        else await sleep(10);
      }
    }),
  );
}

export async function runSpikeBench(
  o: SpikeBenchOptions,
  log: (line: string) => void,
): Promise<ArmResult[]> {
  return withBenchValkey('bench-spike', o.valkey, log, async (valkey, env) => {
    const results: ArmResult[] = [];
    for (const variant of o.variants) {
      for (const pace of o.paces) results.push(await runArm(variant, pace, o, valkey, env, log));
    }
    return results;
  });
}

const fmt = (x: number | null, digits = 0) => (x === null ? 'none' : x.toFixed(digits));

/** "p50 / max" of a list of milliseconds, or none. */
function spread(ms: number[]): string {
  return ms.length ? `${fmt(median(ms))} / ${fmt(Math.max(...ms))}` : 'none';
}

/** Median time to memory +5% of target; trials where it never rose that far are counted. */
function riseText(trials: Trial[]): string {
  const known = trials.map((t) => t.riseMs).filter((x): x is number => x !== null);
  const never = trials.length - known.length;
  return `${known.length ? fmt(median(known)) : 'never'}${never && known.length ? ` (${never} never)` : ''}`;
}

export function formatSpikeBench(results: ArmResult[], o: SpikeBenchOptions): string {
  const lines = [
    `| workload | feed tick | u before | m before | memory +5% after ms | both gateways lower after ms, p50 / max | ... after memory +5%, p50 / max | lowest m | peak memory / target | emergency entries | feed samples/s | feed publishes/s | writes ok / 429 / other |`,
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const r of results) {
    const reactions = r.trials.map((t) => t.reactionMs);
    const known = reactions.filter((x): x is number => x !== null);
    const missed = reactions.length - known.length;
    // Negative: the slope moved m before memory was up by 5% of the target.
    const afterRise = r.trials
      .filter((t) => t.reactionMs !== null && t.riseMs !== null)
      .map((t) => t.reactionMs! - t.riseMs!);
    const tick = r.pace === 'fast' ? `${o.tickMs} -> ${o.fastTickMs} ms` : `${o.tickMs} ms`;
    const what =
      r.variant === 'spike'
        ? `spike ${o.spikeShare} x headroom`
        : `burst ${o.burstContentBytes / 1024} KiB x ${o.burstSec} s`;
    lines.push(
      `| ${what} | ${tick} | ${median(r.trials.map((t) => t.uBefore)).toFixed(2)} | ` +
        `${median(r.trials.map((t) => Math.min(...t.mBefore))).toFixed(2)} | ` +
        `${riseText(r.trials)} | ` +
        `${spread(known)}${missed ? ` (${missed} of ${reactions.length} none)` : ''} | ` +
        `${spread(afterRise)} | ` +
        `${Math.min(...r.trials.map((t) => t.mAfter)).toFixed(2)} | ` +
        `${Math.max(...r.trials.map((t) => t.peakOverTarget)).toFixed(3)} | ${r.emergencyEntries} | ` +
        `${r.feedSamplesPerSec.toFixed(1)} | ${r.feedPublishesPerSec.toFixed(1)} | ` +
        `${r.writes.ok} / ${r.writes.limited429} / ${r.writes.other + r.writes.errors} |`,
    );
  }
  return lines.join('\n');
}
