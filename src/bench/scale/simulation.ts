/**
 * The scale simulation: the real decider, lease book and consumers of every gateway, on a
 * virtual clock, against the Valkey model, driven by Zipf traffic with a hot key. Reports
 * over- and under-admission per key and window against the bounds, Valkey commands per
 * primary, decision latency, points stranded in leases and the hot key's primary's load.
 */
import { Policy } from '../../quota/policy.js';
import { QuotaDecider } from '../../quota/decider.js';
import type { LeaseEvent } from '../../quota/leases.js';
import type { NodeMultipliers } from '../../quota/multipliers.js';
import { seededRandom } from '../../util/random.js';
import { configOverBound, underBound, windowOverBound } from './bound.js';
import type { ContractTerms } from './bound.js';
import { VirtualClock } from './clock.js';
import { hopOf, quotaSettings } from './config.js';
import type { ScaleConfig } from './config.js';
import { addWindow, emptyAccuracy, keepWorst, meanMax, overOf } from './figures.js';
import { DecisionRecorder, writeRequest } from './recorder.js';
import type { AccuracyTally, OverWindow } from './figures.js';
import { AdmissionLedger } from './ledger.js';
import { HOT_KEY, drawWrite, topShare, writesDue } from './traffic.js';
import { ValkeyModel } from './valkey-model.js';
import type { WriteTag } from './valkey-model.js';
import { evenSlotOwners, keySlot } from './slots.js';

/** Virtual epoch of the run: small, so that a tick of 0.05 ms stays exact in a double. */
const START_MS = 1_000_000;
const NODE = 'relay-a';
/** Windows most over their limit kept in the result, per run. */
const WORST_KEPT = 10;

export interface ScaleResult {
  config: ScaleConfig;
  /** Real seconds the run took on this machine, CPU seconds it used, and the events it ran. */
  wallSec: number;
  cpuSec: number;
  events: number;
  writes: number;
  admitted: number;
  accuracy: AccuracyTally & {
    /** The bound from the settings alone (docs/GATEWAY.md), per key and window. */
    configOverBound: number;
    underBound: number;
    /** under / admissible, percent. */
    underPct: number;
    refusedWithoutWindow: number;
    unplaced: number;
    /** The windows most over their limit: key, when, admitted, over, their bound. */
    worst: OverWindow[];
  };
  valkey: {
    commands: number;
    commandsPerSecPerShard: { mean: number; max: number; min: number };
    perShard: number[];
    hotShard: number;
    hotShardCommandsPerSec: number;
    hotKeyCommandsPerSec: number;
    redirects: number;
    timeouts: number;
    lostPoints: number;
  };
  latencyMs: { p50: number; p99: number; p999: number; max: number };
  outcomes: Record<string, number>;
  strandedPerGateway: { mean: number; max: number; total: number };
}

/** A static board: every node at multiplier 1 (pressure is not what this measures). */
const BOARD: NodeMultipliers = {
  get: () => ({ value: 1 }),
  onChange: () => undefined,
};

/** The traffic's random source: the same for a simulation and a real run of one seed. */
export function trafficSeed(seed: number): number {
  return seed * 7 + 3;
}

/** When the failover (or pause) starts: a third of the way in. */
export function faultAt(cfg: ScaleConfig): number {
  return (cfg.durationSec * 1000) / 3;
}

export async function simulateScale(cfg: ScaleConfig): Promise<ScaleResult> {
  const wallStart = performance.now();
  const cpuStart = process.cpuUsage();
  const clock = new VirtualClock(START_MS, cfg.tickMs);
  const windowMs = cfg.windowSec * 1000;
  const terms: ContractTerms = {
    limit: cfg.limit,
    gateways: cfg.gateways,
    workers: cfg.workers,
    leases: cfg.leases,
  };
  const accuracy = emptyAccuracy();
  const uBound = underBound(terms);
  const worst: OverWindow[] = [];
  const ledger = new AdmissionLedger(windowMs, (key, w, complete) => {
    const bound = windowOverBound(terms, w.lost, w.insured > 0, w.end - w.start, windowMs);
    addWindow(accuracy, w, complete, cfg.limit, bound, uBound);
    const over = overOf(w, cfg.limit);
    if (over > 0) {
      const { admitted, lost, insured } = w;
      const at = { startMs: w.start - START_MS, spanMs: w.end - w.start };
      keepWorst(worst, { key, ...at, admitted, over, bound, lost, insured }, WORST_KEPT);
    }
  });
  const hotShardIx = evenSlotOwners(cfg.primaries)[keySlot(HOT_KEY)]!;
  const durationMs = cfg.durationSec * 1000;
  const model = new ValkeyModel(
    clock,
    {
      primaries: cfg.primaries,
      serviceRatePerSec: cfg.serviceRatePerSec,
      hop: hopOf(cfg),
      timeoutMs: cfg.timeoutMs,
      failover: cfg.failover
        ? {
            shard: hotShardIx,
            atMs: START_MS + faultAt(cfg),
            pauseMs: cfg.failoverPauseMs,
            lostMs: cfg.pauseOnly ? 0 : cfg.failoverLostMs,
            clientPause: cfg.pauseOnly,
          }
        : undefined,
      migration: cfg.migration
        ? {
            slots: [keySlot(HOT_KEY)],
            to: (hotShardIx + 1) % cfg.primaries,
            atMs: START_MS + durationMs / 2,
            durationMs: cfg.migrationMs,
          }
        : undefined,
      seed: cfg.seed,
    },
    ledger,
    HOT_KEY,
  );

  const settings = quotaSettings(cfg);
  const policy = new Policy(settings);
  const holders = cfg.gateways * cfg.workers;
  const held = new Float64Array(holders);
  const deciders = Array.from({ length: holders }, (_, h) =>
    clock.withTimers(
      () =>
        new QuotaDecider(model.storeFor(h), policy, BOARD, settings, {
          now: clock.now,
          workers: cfg.workers,
          maxTrackedClients: cfg.maxTrackedClients,
          onLeasePoints: (e: LeaseEvent, n: number) => {
            held[h] = (held[h] ?? 0) + (e === 'leased' || e === 'refunded' ? n : -n);
          },
        }),
    ),
  );

  const random = seededRandom(trafficSeed(cfg.seed));
  const recorder = new DecisionRecorder(ledger, cfg.tickMs);
  const tickMs = cfg.tickMs;
  let carry = 0;

  const write = (client: string, holder: number) => {
    const t0 = clock.now();
    const tag: WriteTag = {};
    model.tag = tag;
    const pending = deciders[holder]!.decide(writeRequest(client, NODE));
    model.tag = undefined;
    void Promise.resolve(pending).then((d) =>
      recorder.record(client, d, t0, clock.now(), tag.evalAt),
    );
  };

  const arrive = () => {
    const t = clock.now();
    if (t >= START_MS + durationMs) return;
    const [n, rest] = writesDue(carry, cfg.writesPerSec, tickMs);
    carry = rest;
    for (let i = 0; i < n; i++) {
      const w = drawWrite(random, cfg, t - START_MS);
      write(w.client, w.holder);
    }
    clock.at(t + tickMs, arrive);
  };
  clock.at(START_MS, arrive);

  await clock.runUntil(START_MS + durationMs);
  const endMs = START_MS + durationMs;
  const stranded = meanMax([...held]);
  // Let what is in flight settle (no new writes) before the tallies close.
  await clock.runUntil(endMs + cfg.timeoutMs + 50);
  ledger.finish(cfg.judgeOpenWindows ? Infinity : endMs);

  const perShard = model.commandsPerShard();
  const commands = perShard.reduce((a, b) => a + b, 0);
  const perSec = perShard.map((c) => c / cfg.durationSec);
  const hotKeyCommands = model.hotCommandsPerShard().reduce((a, b) => a + b, 0);
  // The busiest key's points a second: the hot key, or the most popular identity.
  const topRate =
    cfg.writesPerSec *
    Math.max(cfg.hotShare, (1 - cfg.hotShare) * topShare(cfg.identities, cfg.zipf));
  return {
    config: cfg,
    wallSec: (performance.now() - wallStart) / 1000,
    cpuSec: cpuSecondsSince(cpuStart),
    events: clock.ran,
    writes: recorder.writes,
    admitted: recorder.admitted,
    accuracy: {
      ...accuracy,
      configOverBound: configOverBound(
        terms,
        cfg.failover && !cfg.pauseOnly
          ? { lostMs: cfg.failoverLostMs, ratePerSec: topRate }
          : undefined,
        cfg.failover,
      ),
      underBound: uBound,
      underPct: accuracy.admissible > 0 ? (100 * accuracy.underPoints) / accuracy.admissible : 0,
      refusedWithoutWindow: ledger.refusedWithoutWindow,
      unplaced: ledger.unplaced,
      worst,
    },
    valkey: {
      commands,
      commandsPerSecPerShard: { ...meanMax(perSec), min: Math.min(...perSec) },
      perShard,
      hotShard: hotShardIx,
      hotShardCommandsPerSec: perSec[hotShardIx]!,
      hotKeyCommandsPerSec: hotKeyCommands / cfg.durationSec,
      redirects: model.redirects,
      timeouts: model.timeouts,
      lostPoints: model.lostPoints,
    },
    latencyMs: recorder.latencyFigures(),
    outcomes: recorder.outcomes,
    strandedPerGateway: { ...stranded, total: [...held].reduce((a, b) => a + b, 0) },
  };
}

function cpuSecondsSince(start: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1e6;
}
