import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import { parsePrometheusValue } from '../../pressure/feed/samplers.js';
import { startFeed, startGateway, startRelay } from '../../harness/processes.js';
import type { SluiceProcess } from '../../harness/processes.js';
import { median } from '../stats.js';
import { ProcessSampler } from './proc-sampler.js';
import type { ProcessUsage, WatchedProcess } from './proc-sampler.js';
import type { ClientKind, Topology } from '../../store/options.js';
import { BENCH_ADMIN_TOKEN } from './gateway-config.js';

/** The Valkey a variant's feed and gateways use. */
export interface AdaptiveValkey {
  client: ClientKind;
  mode: Topology;
  nodes: string[];
}

/** What the writers got back, by kind. */
export interface WriteCounts {
  requests: number;
  ok2xx: number;
  limited429: number;
  otherNon2xx: number;
  errors: number;
}

export type Variant = 'none' | 'pid' | 'lead';

export interface AdaptiveBenchOptions {
  /** Seconds of overload per variant. */
  overloadSec: number;
  /** Seconds at a sustainable load before the step. */
  calmSec: number;
  drainBytesPerSec: number;
  eventContentBytes: number;
  /** Offered load as a multiple of what the relay drains. */
  overload: number;
  /** Memory the feed aims the relay at, above the idle relay's own. */
  headroomBytes: number;
  tickMs: number;
  variants: Variant[];
  outDir: string;
}

export interface Sample {
  t: number;
  u: number;
  m: number;
  admittedPerSec: number;
  backlogBytes: number;
  mode: string;
}

export interface VariantSummary {
  variant: Variant;
  peakUOverTarget: number;
  secondsAboveTarget: number;
  emergencyEntries: number;
  emergencyExits: number;
  acceptedPerSec: number;
  sustainablePerSec: number;
  acceptedShareOfSustainable: number;
  mPeakToPeak: number;
  uPeakToPeak: number;
  propagationP50Ms: number | null;
  propagationP99Ms: number | null;
}

function post(url: string, body: string, from: string): Promise<number> {
  return new Promise((resolve) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        localAddress: from,
        agent: false,
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', () => resolve(0));
    req.end(body);
  });
}

async function json<T>(url: string, headers: Record<string, string> = {}): Promise<T> {
  const res = await fetch(url, { headers });
  return (await res.json()) as T;
}

async function metricValue(url: string, name: string, labels?: string): Promise<number> {
  // A labelled counter that never moved is not exported at all: that reads as 0.
  return parsePrometheusValue(await (await fetch(url)).text(), name, labels) ?? 0;
}

/**
 * One variant: a fresh relay, feed and two gateways; a calm phase, then the overload step.
 * `watch` names further processes (the Valkey nodes) to sample beside the variant's own.
 */
export async function runVariant(
  variant: Variant,
  opts: Omit<AdaptiveBenchOptions, 'variants' | 'outDir'>,
  valkey: AdaptiveValkey,
  env: NodeJS.ProcessEnv,
  log: (l: string) => void,
  watch: WatchedProcess[] = [],
) {
  const started: SluiceProcess[] = [];
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'sluice-adaptive-relay-'));
  try {
    const relay = await startRelay({
      nodeId: 'relay-a',
      dataDir,
      fresh: true,
      drainBytesPerSec: opts.drainBytesPerSec,
      env,
    });
    started.push(relay);
    const idle = (await json<{ rssAnonBytes: number }>(`${relay.url}/stats`)).rssAnonBytes;
    const target = idle + opts.headroomBytes;
    const feed = await startFeed({
      nodeId: 'relay-a',
      relayUrl: relay.url,
      targetBytes: target,
      tickMs: opts.tickMs,
      law: variant === 'pid' ? 'pid' : 'lead',
      valkey,
      env,
    });
    started.push(feed);
    const eventBytes = opts.eventContentBytes + 400;
    const sustainablePerSec = opts.drainBytesPerSec / eventBytes;
    const quotaPerSec = Math.round(sustainablePerSec * opts.overload);
    const configDir = mkdtempSync(path.join(os.tmpdir(), 'sluice-adaptive-gw-'));
    const gateways: { url: string; admin: string }[] = [];
    for (let g = 0; g < 2; g++) {
      const gw = await startGateway(
        {
          listen: { port: 0 },
          admin: { port: 0, token: BENCH_ADMIN_TOKEN },
          valkey: { client: valkey.client, mode: valkey.mode, nodes: valkey.nodes },
          upstreams: [{ id: 'relay-a', url: relay.url }],
          logging: { level: 'warn' },
          workers: 1,
          limits: { maxBodyBytes: 4 * eventBytes },
          quotas: {
            keyPrefix: `adaptive-${variant}-${Date.now()}`,
            tiers: { default: { write: { points: quotaPerSec, windowSec: 1 } } },
          },
          pressure: {
            enabled: variant !== 'none',
            evaluateMs: 100,
            staleAfterMs: 3 * opts.tickMs,
            holdMs: 2000,
          },
        },
        path.join(configDir, `gw${g}.json`),
        { env },
      );
      started.push(gw.proc);
      gateways.push({ url: gw.url, admin: gw.adminUrl });
    }

    // Writers: one client identity (its quota is the overload), events signed as they go.
    const sk = generateSecretKey();
    const content = 'x'.repeat(opts.eventContentBytes);
    let admitted = 0;
    const counts: WriteCounts = {
      requests: 0,
      ok2xx: 0,
      limited429: 0,
      otherNon2xx: 0,
      errors: 0,
    };
    let stop = false;
    let offeredPerSec = sustainablePerSec * 0.5;
    let n = 0;
    const writer = async (w: number) => {
      while (!stop) {
        const t0 = Date.now();
        const body = JSON.stringify(
          finalizeEvent(
            { kind: 1, created_at: Math.floor(t0 / 1000), tags: [['n', String(n++)]], content },
            sk,
          ),
        );
        const status = await post(`${gateways[w % 2]!.url}/events`, body, '127.0.0.3');
        if (status === 0) counts.errors++;
        else {
          counts.requests++;
          if (status >= 200 && status < 300) counts.ok2xx++;
          else if (status === 429) counts.limited429++;
          else counts.otherNon2xx++;
        }
        if (status === 200) admitted++;
        // Pace each writer to its share of the offered rate.
        const wait = (1000 * 4) / offeredPerSec - (Date.now() - t0);
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
    };
    const sampler = new ProcessSampler([
      { role: 'relay', name: 'relay-a', pid: relay.pid },
      { role: 'feed', name: 'feed relay-a', pid: feed.pid },
      ...started
        .slice(2)
        .map((g, i) => ({ role: 'gateway' as const, name: `gateway ${i + 1}`, pid: g.pid })),
      ...watch,
    ]);
    sampler.start();
    const writers = [0, 1, 2, 3].map(writer);
    const samples: Sample[] = [];
    const t0 = Date.now();
    const total = opts.calmSec + opts.overloadSec;
    let lastAdmitted = 0;
    let lastAt = t0;
    while ((Date.now() - t0) / 1000 < total) {
      const t = (Date.now() - t0) / 1000;
      // The step: from half of sustainable to `overload` x sustainable (the quota's ceiling).
      offeredPerSec = t < opts.calmSec ? sustainablePerSec * 0.5 : quotaPerSec * 1.2;
      await new Promise((r) => setTimeout(r, 250));
      const [stats, flow] = await Promise.all([
        json<{ rssAnonBytes: number; backlogBytes: number }>(`${relay.url}/stats`),
        json<{ nodes: Record<string, { multiplier: number; emergency: boolean }> }>(
          `${gateways[0]!.admin}/admin/flow-control`,
          {
            authorization: `Bearer ${BENCH_ADMIN_TOKEN}`,
          },
        ),
      ]);
      const now = Date.now();
      const node = flow.nodes['relay-a']!;
      samples.push({
        t: (now - t0) / 1000,
        u: stats.rssAnonBytes / target,
        m: node.multiplier,
        admittedPerSec: ((admitted - lastAdmitted) * 1000) / (now - lastAt),
        backlogBytes: stats.backlogBytes,
        mode: node.emergency ? 'emergency' : 'normal',
      });
      lastAdmitted = admitted;
      lastAt = now;
    }
    stop = true;
    await Promise.all(writers);
    const wallSeconds = (Date.now() - t0) / 1000;
    const processes: ProcessUsage[] = sampler.stop();

    const feedMetrics = `${/^sluice feed ready: (\S+)/.exec(feed.readyLine)![1]}/metrics`;
    const entries = await metricValue(
      feedMetrics,
      'sluice_feed_emergency_transitions_total',
      '{to="emergency"}',
    );
    const exits = await metricValue(
      feedMetrics,
      'sluice_feed_emergency_transitions_total',
      '{to="normal"}',
    );
    const prop = await Promise.all(
      gateways.map(async (g) => ({
        p50: await metricValue(
          `${g.admin}/metrics`,
          'sluice_pressure_propagation_seconds',
          '{quantile="0.5"}',
        ),
        p99: await metricValue(
          `${g.admin}/metrics`,
          'sluice_pressure_propagation_seconds',
          '{quantile="0.99"}',
        ),
      })),
    );
    const over = samples.filter((s) => s.t >= opts.calmSec);
    const settled = over.filter((s) => s.t >= opts.calmSec + Math.min(60, opts.overloadSec / 2));
    const range = (xs: number[]) => (xs.length ? Math.max(...xs) - Math.min(...xs) : 0);
    const summary: VariantSummary = {
      variant,
      peakUOverTarget: Math.max(...samples.map((s) => s.u)),
      secondsAboveTarget: samples.filter((s) => s.u > 1).length * 0.25,
      emergencyEntries: entries,
      emergencyExits: exits,
      acceptedPerSec: over.reduce((a, s) => a + s.admittedPerSec, 0) / Math.max(1, over.length),
      sustainablePerSec,
      acceptedShareOfSustainable:
        over.reduce((a, s) => a + s.admittedPerSec, 0) /
        Math.max(1, over.length) /
        sustainablePerSec,
      mPeakToPeak: range(settled.map((s) => s.m)),
      uPeakToPeak: range(settled.map((s) => s.u)),
      propagationP50Ms: variant === 'none' ? null : 1000 * median(prop.map((p) => p.p50)),
      propagationP99Ms: variant === 'none' ? null : 1000 * Math.max(...prop.map((p) => p.p99)),
    };
    log(
      `${variant}: peak u ${summary.peakUOverTarget.toFixed(2)}, ${summary.secondsAboveTarget}s above target, accepted ${summary.acceptedShareOfSustainable.toFixed(2)} of sustainable`,
    );
    return { summary, samples, target, idle, quotaPerSec, counts, wallSeconds, processes };
  } finally {
    await Promise.allSettled(started.reverse().map((p) => p.stop()));
    rmSync(dataDir, { recursive: true, force: true });
  }
}
