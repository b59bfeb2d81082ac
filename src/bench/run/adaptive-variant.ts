import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import { startFeed, startRelay } from '../../harness/processes.js';
import type { SluiceProcess } from '../../harness/processes.js';
import { ProcessSampler } from './proc-sampler.js';
import type { ProcessUsage, WatchedProcess } from './proc-sampler.js';
import {
  emergencyTransitions,
  feedLawOf,
  propagationMs,
  readFlow,
  startPressureGateways,
} from './adaptive-gateways.js';
import type { AdaptiveValkey, Variant } from './adaptive-gateways.js';
import { postEvent } from './post-event.js';
import { emptyCounts, tally } from './write-counts.js';
import type { WriteCounts } from './write-counts.js';

export type { AdaptiveValkey, Variant, WriteCounts };

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

async function json<T>(url: string): Promise<T> {
  const res = await fetch(url);
  return (await res.json()) as T;
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
  try {
    // A data directory of its own, removed when it stops.
    const relay = await startRelay({
      nodeId: 'relay-a',
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
      law: feedLawOf(variant),
      valkey,
      env,
    });
    started.push(feed);
    const eventBytes = opts.eventContentBytes + 400;
    const sustainablePerSec = opts.drainBytesPerSec / eventBytes;
    const quotaPerSec = Math.round(sustainablePerSec * opts.overload);
    const configDir = mkdtempSync(path.join(os.tmpdir(), 'sluice-adaptive-gw-'));
    const gateways = await startPressureGateways(
      {
        variant,
        count: 2,
        nodeId: 'relay-a',
        relayUrl: relay.url,
        valkey,
        quotaPerSec,
        maxBodyBytes: 4 * eventBytes,
        tickMs: opts.tickMs,
        configDir,
        env,
      },
      started,
    );

    // Writers: one client identity (its quota is the overload), events signed as they go.
    const sk = generateSecretKey();
    const content = 'x'.repeat(opts.eventContentBytes);
    let admitted = 0;
    const counts: WriteCounts = emptyCounts();
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
        const { status } = await postEvent(`${gateways[w % 2]!.url}/events`, body, '127.0.0.3');
        tally(counts, status);
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
      const [stats, node] = await Promise.all([
        json<{ rssAnonBytes: number; backlogBytes: number }>(`${relay.url}/stats`),
        readFlow(gateways[0]!, 'relay-a'),
      ]);
      const now = Date.now();
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

    const { entries, exits } = await emergencyTransitions(feed);
    const prop = await propagationMs(gateways);
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
      propagationP50Ms: variant === 'none' ? null : prop.p50,
      propagationP99Ms: variant === 'none' ? null : prop.p99,
    };
    log(
      `${variant}: peak u ${summary.peakUOverTarget.toFixed(2)}, ${summary.secondsAboveTarget}s above target, accepted ${summary.acceptedShareOfSustainable.toFixed(2)} of sustainable`,
    );
    return { summary, samples, target, idle, quotaPerSec, counts, wallSeconds, processes };
  } finally {
    await Promise.allSettled(started.reverse().map((p) => p.stop()));
  }
}
