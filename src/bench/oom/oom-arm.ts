/**
 * One arm of the OOM benchmark against one flood: a fresh memory cgroup with a hard limit
 * (the relay's idle working set + a headroom), the relay started inside it and restarted
 * after every kill, a feed sampling the group, gateways with pressure on or off, a calm
 * phase and then the flood; afterwards the relay is stopped gracefully and started again on
 * the same data to read back every event a writer was told was stored.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startFeed } from '../../harness/processes.js';
import type { ProcessExit, SluiceProcess } from '../../harness/processes.js';
import {
  emergencyTransitions,
  feedLawOf,
  propagationMs,
  readFlow,
  startPressureGateways,
} from '../run/adaptive-gateways.js';
import type { AdaptiveValkey, Variant } from '../run/adaptive-gateways.js';
import { MemoryGroup } from './cgroup.js';
import { admittedKey, createStore, parseNodeAddress } from '../../store/index.js';
import { learnedBudgetKey } from '../../pressure/feed/feed.js';
import { Flood } from './flood.js';
import type { FloodShape, FloodTransport } from './flood.js';
import type { OomRelay } from './relays.js';
import { lostEvents, summarizeArm } from './summary.js';
import type { ArmFrame, ArmSummary, LostAccounting, OomSample } from './summary.js';
import { SlowReaders } from './slow-readers.js';
import { Supervisor } from './supervisor.js';
import type { Death } from './supervisor.js';

export interface OomScenario {
  /** The hard limit, above the relay's idle working set. */
  limitHeadroomBytes: number;
  /** The feed's target, above the relay's idle working set. */
  targetHeadroomBytes: number;
  /** Writes per second the relay sustains (its drain over the event's stored size). */
  sustainablePerSec: number;
  /** The flood, as a multiple of the sustainable rate; the heavy writer's quota too. */
  overload: number;
  /** Offered during the calm phase, as a multiple of the sustainable rate. */
  calmLoad: number;
  calmSec: number;
  floodSec: number;
  contentBytes: number;
  eventBytes: number;
  identities: number;
  gateways: number;
  tickMs: number;
  /**
   * Give the gateways the node's write budget (sustainable events/s) in adaptive arms, as
   * upstreams[].writeBudget; without it they apply the budget the feed learns (learnBudget).
   */
  writeBudget: boolean;
  /** The feed learns the node's budget (its default); false: --no-learn-budget. */
  learnBudget: boolean;
  /** Learn from the reference relay's own drain metric (else from memory and admitted bytes). */
  learnFromDrain: boolean;
  /** What the feed samples: the group (the figures), or the relay's own metric. */
  feedSource: 'cgroup' | 'relay';
  seed: number;
  maxInFlight: number;
  /** Subscribers that never read (0: none), connected straight to the relay or through a gateway. */
  slowReaders: number;
  slowReadersVia: 'relay' | 'gateway';
}

export interface ArmResult {
  variant: Variant;
  flood: FloodShape;
  frame: ArmFrame;
  summary: ArmSummary;
  lost: LostAccounting;
  deaths: Death[];
  /** How the relay's last process ended when the run stopped it (a graceful stop: 0). */
  finalStop: ProcessExit;
  quotaPerSec: number;
  writeBudgetPerSec: number | null;
  emergencyEntries: number;
  propagationMs: { p50: number; p99: number } | null;
  codes: Record<string, number>;
  cgroup: { version: 1 | 2; dir: string; peakUsageBytes: number | null };
  /** Slow readers' connections lost to relay restarts (each reconnected). */
  slowReaderCloses: number;
  samples: OomSample[];
}

const SAMPLE_MS = 200;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The idle relay's working set: the highest of a few readings once it has settled. */
async function idleWorkingSet(group: MemoryGroup): Promise<number> {
  await sleep(1000);
  let idle = 0;
  for (let i = 0; i < 8; i++) {
    idle = Math.max(idle, (await group.read()).workingSetBytes);
    await sleep(250);
  }
  return idle;
}

export interface ArmContext {
  /** A fresh relay (its own port and empty data) for each arm. */
  makeRelay(): Promise<OomRelay>;
  valkey: AdaptiveValkey;
  env: NodeJS.ProcessEnv;
  cgroupParent?: string;
  transportFor(gatewayUrls: string[], shape: FloodShape): FloodTransport;
  log: (line: string) => void;
  signal?: AbortSignal;
}

export async function runArm(
  variant: Variant,
  shape: FloodShape,
  sc: OomScenario,
  ctx: ArmContext,
): Promise<ArmResult> {
  const { log } = ctx;
  const started: { stop(): Promise<unknown> }[] = [];
  const group = await MemoryGroup.create(ctx.cgroupParent);
  const configDir = mkdtempSync(path.join(os.tmpdir(), 'sluice-oom-gw-'));
  let relay: OomRelay | undefined;
  let supervisor: Supervisor | undefined;
  let transport: FloodTransport | undefined;
  let readers: SlowReaders | undefined;
  try {
    relay = await ctx.makeRelay();
    const quotaPerSec = Math.round(sc.sustainablePerSec * sc.overload);
    const flood = await Flood.create({
      shape,
      identities: shape === 'heavy' ? 1 : sc.identities,
      contentBytes: sc.contentBytes,
      seed: sc.seed,
      maxInFlight: sc.maxInFlight,
      transport: {
        send: (identity, event) => transport!.send(identity, event),
        close: async () => {},
      },
    });
    supervisor = new Supervisor(relay, group.procsFile, () => flood.elapsed(), log);
    await supervisor.begin();
    const idle = await idleWorkingSet(group);
    const frame: ArmFrame = {
      idleBytes: idle,
      limitBytes: idle + sc.limitHeadroomBytes,
      targetBytes: idle + sc.targetHeadroomBytes,
      sustainablePerSec: sc.sustainablePerSec,
      calmSec: sc.calmSec,
      floodSec: sc.floodSec,
    };
    await group.setLimit(frame.limitBytes);
    // A fresh node: nothing learned of the previous arm's relay (the same node id).
    await forgetLearned(relay.nodeId, ctx.valkey);
    const feed: SluiceProcess = await startFeed({
      nodeId: relay.nodeId,
      ...(sc.feedSource === 'cgroup' ? { cgroup: group.dir } : { relayUrl: supervisor.url }),
      targetBytes: frame.targetBytes,
      tickMs: sc.tickMs,
      law: feedLawOf(variant),
      learnBudget: sc.learnBudget,
      // The reference relay exports its own drain: the learned budget reads it there.
      ...(relay.impl === 'reference' && sc.learnBudget && sc.learnFromDrain
        ? { drainStats: supervisor.url }
        : {}),
      valkey: ctx.valkey,
      env: ctx.env,
    });
    started.push(feed);
    const writeBudgetPerSec =
      sc.writeBudget && variant !== 'none' ? Math.floor(sc.sustainablePerSec) : null;
    const gateways = await startPressureGateways(
      {
        variant,
        count: sc.gateways,
        nodeId: relay.nodeId,
        relayUrl: supervisor.url,
        valkey: ctx.valkey,
        quotaPerSec,
        maxBodyBytes: 4 * sc.eventBytes,
        tickMs: sc.tickMs,
        ...(writeBudgetPerSec ? { writeBudget: { points: writeBudgetPerSec, windowSec: 1 } } : {}),
        extra: relay.gatewayExtra,
        configDir,
        env: ctx.env,
      },
      started,
    );
    transport = ctx.transportFor(
      gateways.map((g) => g.url),
      shape,
    );
    if (sc.slowReaders > 0) {
      const via = sc.slowReadersVia === 'relay' ? [supervisor.url] : gateways.map((g) => g.url);
      readers = new SlowReaders(sc.slowReaders, (r) => via[r % via.length]!.replace(/^http/, 'ws'));
      readers.start();
      supervisor.onRestart = () => readers?.reconnectAll();
    }
    log(
      `  ${relay.impl} / ${shape} / ${variant}: idle ${mib(idle)}, limit ${mib(frame.limitBytes)}, ` +
        `target ${mib(frame.targetBytes)}, sustainable ${sc.sustainablePerSec.toFixed(1)}/s, ` +
        `flood ${(sc.overload * sc.sustainablePerSec).toFixed(1)}/s`,
    );

    // Sample the group, the gateways' multiplier and the acks until the flood ends.
    const samples: OomSample[] = [];
    let flooding = true;
    const sampling = (async () => {
      let shown = -1;
      while (flooding) {
        const [reading, flow] = await Promise.all([
          group.read(),
          readFlow(gateways[0]!, relay.nodeId).catch(() => null),
        ]);
        const t = flood.elapsed();
        samples.push({
          t,
          workingSetBytes: reading.workingSetBytes,
          usageBytes: reading.usageBytes,
          anonBytes: reading.anonBytes,
          activeFileBytes: reading.activeFileBytes,
          oomKills: reading.oomKills,
          multiplier: flow?.multiplier ?? null,
          emergency: flow?.emergency ?? null,
          acked: flood.acknowledged,
        });
        if (Math.floor(t / 10) > shown) {
          shown = Math.floor(t / 10);
          log(
            `    ${t.toFixed(0)} s: ${(reading.workingSetBytes / frame.targetBytes).toFixed(2)} x target, ` +
              `m ${flow?.multiplier ?? '-'}, ${reading.oomKills} kills, ${flood.acknowledged} acked`,
          );
        }
        await sleep(SAMPLE_MS);
      }
    })();
    const total = sc.calmSec + sc.floodSec;
    await flood.run(
      (t) => sc.sustainablePerSec * (t < sc.calmSec ? sc.calmLoad : sc.overload),
      total,
      ctx.signal,
    );
    flooding = false;
    await sampling;
    await readers?.stop();
    if (ctx.signal?.aborted) throw new Error('stopped');

    // SLUICE_BENCH_OUTPUT_DIR: keep what the feed and gateways logged (warnings: an upstream
    // marked down, Valkey failures), to tell where an arm's 5xx came from.
    const outputDir = ctx.env.SLUICE_BENCH_OUTPUT_DIR;
    if (outputDir) {
      const stem = path.join(outputDir, `${relay.impl}-${shape}-${variant}`);
      writeFileSync(`${stem}-feed.log`, feed.output());
      gateways.forEach((g, i) => writeFileSync(`${stem}-gw${i}.log`, g.proc.output()));
    }
    const { entries } = await emergencyTransitions(feed);
    const propagation = variant === 'none' ? null : await propagationMs(gateways);
    const finalStop = await supervisor.stop();
    const { oomKills: kills, peakUsageBytes } = await group.read();
    await Promise.allSettled(
      started
        .splice(0)
        .reverse()
        .map((p) => p.stop()),
    );

    // Read back, outside the group: what survived every kill and the final stop.
    const reader = await relay.start();
    let found: Set<string>;
    try {
      found = await relay.readBack(
        reader.url,
        flood.acked.map((a) => a.id),
      );
    } finally {
      await reader.stop();
    }
    const lost = lostEvents(flood.acked, found, supervisor.deaths);
    const summary = summarizeArm(frame, samples, flood.acked, flood.counts, lost, kills);
    log(
      `  -> ${summary.oomKills} kills, ${summary.ackedLost} of ${summary.ackedEvents} acked lost, ` +
        `peak ${summary.peakOverTarget.toFixed(2)} x target, accepted ` +
        `${summary.settledAcceptedShareOfSustainable.toFixed(2)} of sustainable (settled), ` +
        `${summary.responses.limited429} x 429, ${summary.responses.server5xx} x 5xx, ` +
        `${summary.responses.errors} errors`,
    );
    return {
      variant,
      flood: shape,
      frame,
      summary,
      lost,
      deaths: supervisor.deaths,
      finalStop,
      quotaPerSec,
      writeBudgetPerSec,
      emergencyEntries: entries,
      propagationMs: propagation,
      codes: flood.counts.codes,
      cgroup: { version: group.version, dir: group.dir, peakUsageBytes },
      slowReaderCloses: readers?.closes ?? 0,
      samples,
    };
  } finally {
    await readers?.stop().catch(() => undefined);
    await transport?.close().catch(() => undefined);
    await supervisor?.stop().catch(() => undefined);
    await Promise.allSettled(started.reverse().map((p) => p.stop()));
    await group.remove();
    relay?.dispose();
    rmSync(configDir, { recursive: true, force: true });
  }
}

/** Remove a node's saved drain estimate and admitted counter (its feed learns from zero). */
async function forgetLearned(nodeId: string, valkey: AdaptiveValkey): Promise<void> {
  const store = await createStore({
    client: valkey.client,
    mode: valkey.mode,
    nodes: valkey.nodes.map((n) => parseNodeAddress(n)),
    clientName: 'sluice-bench-oom',
  });
  try {
    await store.kv.del(learnedBudgetKey(nodeId));
    await store.kv.del(admittedKey(nodeId));
  } finally {
    await store.close();
  }
}

function mib(bytes: number): string {
  return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}
