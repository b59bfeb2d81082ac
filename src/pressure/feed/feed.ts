import { performance } from 'node:perf_hooks';
import { Counter, Gauge, Registry } from 'prom-client';
import type { KeyValue } from '../../store/kv.js';
import type { BacklogSample, ControlLaw, LawOutput } from '../laws/law.js';
import { decodeLawParams, lawParamsKey } from '../laws/law-params.js';
import type { LawParams } from '../laws/law-params.js';
import { PRESSURE_CHANNEL, encodeReport, pressureKey } from '../report.js';
import type { PressureReport } from '../report.js';
import type { Sampler } from './samplers.js';
import type { AdmittedCounts } from '../../store/admitted.js';
import { budgetPointsOf } from '../budget/estimator.js';
import type { DrainEstimator } from '../budget/estimator.js';
import { TickPace, paceParams, shouldPublish } from './tick-pace.js';

export interface FeedLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface FeedOptions {
  nodeId: string;
  /** Build the law, with parameter overrides from the admin endpoint (re-built when they change). */
  makeLaw?: (overrides: LawParams) => ControlLaw;
  sampler: Sampler;
  /** Optional second input: the relay's backlog and measured drain rate. */
  backlog?: () => Promise<BacklogSample | undefined>;
  targetBytes: number;
  /** The tick at rest (ms): the heartbeat of publication and the unit of the report's lease. */
  tickMs: number;
  /** The tick while u or uhat is at or above fastAbove (default: tickMs, no fast pace). */
  fastTickMs?: number;
  fastAbove?: number;
  law: ControlLaw;
  kv: KeyValue;
  log: FeedLog;
  /**
   * Learn the node's write budget (pressure/budget): what the gateways admitted to it, read
   * on the tick, and the estimator that turns that and memory into what the node drains.
   * Absent: no budget is published (gateways then apply only a configured writeBudget).
   */
  learn?: {
    admitted: Pick<AdmittedCounts, 'read'>;
    /** Start from nothing learned: the saved estimate is dropped, not restored. */
    forget?: boolean;
    estimator: DrainEstimator;
    /** The relay's own drain where it exports one and it is not the backlog source already. */
    drain?: () => Promise<BacklogSample | undefined>;
  };
}

/** Where a feed keeps its estimate across restarts (a day's lease: a dead node's goes). */
export function learnedBudgetKey(nodeId: string): string {
  return `sluice:budget:{${nodeId}}`;
}
const LEARNED_TTL_MS = 86_400_000;
/** The admitted counter is read at most this often, whatever the tick's pace. */
const ADMITTED_READ_MS = 250;
/** The estimate is saved at most this often. */
const LEARNED_SAVE_MS = 5_000;

/** The feed's own Prometheus metrics. */
function feedMetrics(registry: Registry) {
  const gauge = (name: string, help: string) => new Gauge({ name, help, registers: [registry] });
  return {
    u: gauge('sluice_feed_u', 'Memory as a ratio of the target'),
    uhat: gauge('sluice_feed_uhat', 'Predicted memory ratio the law acted on'),
    m: gauge('sluice_feed_m', 'Published limit multiplier'),
    emergency: gauge('sluice_feed_emergency', '1 while in emergency mode'),
    lastPublish: gauge(
      'sluice_feed_last_publish_seconds',
      'Unix time of the last published report',
    ),
    transitions: new Counter({
      name: 'sluice_feed_emergency_transitions_total',
      help: 'Entries into and exits from emergency mode',
      labelNames: ['to'] as const,
      registers: [registry],
    }),
    tick: gauge('sluice_feed_tick_seconds', 'The current sampling period'),
    budgetPoints: gauge(
      'sluice_feed_budget_points',
      'The write budget learned for the node (points per second), published in its reports',
    ),
    budgetBytes: gauge(
      'sluice_feed_drain_bytes_per_second',
      'What the feed estimates the node drains (write bytes per second)',
    ),
    samples: new Counter({
      name: 'sluice_feed_samples_total',
      help: 'Memory samples taken (one per tick)',
      registers: [registry],
    }),
    publishes: new Counter({
      name: 'sluice_feed_publishes_total',
      help: 'Reports published (on a change of m or mode, else once per slow tick)',
      registers: [registry],
    }),
    sampleErrors: new Counter({
      name: 'sluice_feed_sample_errors_total',
      help: 'Failed memory samples',
      registers: [registry],
    }),
    publishErrors: new Counter({
      name: 'sluice_feed_publish_errors_total',
      help: 'Failed publications to Valkey',
      registers: [registry],
    }),
  };
}

/**
 * One feed beside one relay node: on its own tick (never per request) it samples memory,
 * steps the control law and publishes the multiplier as a leased key plus a PUBLISH. The
 * tick shortens as pressure rises (TickPace); publication stays on the slow cadence except
 * for changes. When sampling fails it publishes nothing, so the lease runs out and gateways
 * see a stale feed rather than a made-up value.
 */
export class PressureFeed {
  readonly registry = new Registry();
  private readonly metrics = feedMetrics(this.registry);
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly pace: TickPace;
  private lastPublished: { m: number; mode: string; at: number } | undefined;
  private seq = 0;
  private paramsCheckedAt = 0;
  private lastMode: LawOutput['mode'] = 'normal';
  private failing = false;
  private law: ControlLaw;
  private paramsText: string | null = null;
  last: PressureReport | undefined;
  private admittedReadAt = -Infinity;
  private learnedSavedAt = -Infinity;
  private budget: PressureReport['budget'];

  constructor(private readonly opts: FeedOptions) {
    this.law = opts.law;
    this.pace = new TickPace(
      paceParams(opts.tickMs, opts.fastTickMs ?? opts.tickMs, opts.fastAbove ?? Infinity),
    );
    this.metrics.tick.set(opts.tickMs / 1000);
  }

  /** The current sampling period (ms). */
  get tickMs(): number {
    return this.pace.ms;
  }

  /**
   * Pick up parameter changes left in Valkey by a gateway's admin endpoint. A new law starts
   * from fresh filter state; the gateways' up-slew absorbs any step this causes.
   */
  private async refreshParams(): Promise<void> {
    if (!this.opts.makeLaw) return;
    let text: string | null;
    try {
      text = await this.opts.kv.get(lawParamsKey(this.opts.nodeId));
    } catch {
      return; // keep the current law; publication will report the store problem
    }
    if (text === this.paramsText) return;
    const params = text === null ? {} : decodeLawParams(text);
    if (!params) {
      this.opts.log.warn({ text }, 'ignoring invalid law parameters');
      this.paramsText = text;
      return;
    }
    this.paramsText = text;
    try {
      this.law = this.opts.makeLaw(params);
    } catch (err) {
      // A combination the law refuses: keep running on the current parameters.
      this.opts.log.warn({ params, err: (err as Error).message }, 'law parameters rejected');
      return;
    }
    this.opts.log.info({ params }, 'control law parameters changed');
  }

  /** A restarted feed resumes from its last estimate (never from "no data, so minimum"). */
  private async restoreLearned(): Promise<void> {
    const learn = this.opts.learn;
    if (!learn) return;
    try {
      if (learn.forget) {
        await this.opts.kv.del(learnedBudgetKey(this.opts.nodeId));
        return;
      }
      const text = await this.opts.kv.get(learnedBudgetKey(this.opts.nodeId));
      const saved = text
        ? (JSON.parse(text) as {
            bytesPerSec?: unknown;
            maxMeasured?: unknown;
            pointsPerByte?: unknown;
          })
        : null;
      if (saved && typeof saved.bytesPerSec === 'number' && typeof saved.maxMeasured === 'number') {
        learn.estimator.restore({
          bytesPerSec: saved.bytesPerSec,
          maxMeasured: saved.maxMeasured,
          ...(typeof saved.pointsPerByte === 'number'
            ? { pointsPerByte: saved.pointsPerByte }
            : {}),
        });
        const points = budgetPointsOf(learn.estimator.value());
        const restored = learn.estimator.value();
        if (points !== undefined && restored) {
          this.budget = { points, bytesPerSec: Math.round(restored.bytesPerSec) };
        }
        const value = learn.estimator.value();
        if (value) this.opts.log.info({ ...value }, 'learned write budget restored');
      }
    } catch (err) {
      this.opts.log.warn({ err: (err as Error).message }, 'reading the saved budget failed');
    }
  }

  /**
   * One step of the budget's estimator: the admitted counter (at most every 250 ms), memory and
   * the relay's drain where it exports one. A failed read skips the step (the estimate stays).
   */
  private async learn(memoryBytes: number, backlog: BacklogSample | undefined): Promise<void> {
    const learn = this.opts.learn;
    if (!learn) return;
    const now = performance.now();
    if (now - this.admittedReadAt < ADMITTED_READ_MS) return;
    this.admittedReadAt = now;
    let counts: { bytes: number; points: number };
    try {
      counts = await learn.admitted.read(this.opts.nodeId);
    } catch {
      return;
    }
    if (learn.drain) backlog = await learn.drain();
    const estimate = learn.estimator.observe({
      t: now / 1000,
      admittedBytes: counts.bytes,
      admittedPoints: counts.points,
      memoryBytes,
      relay: backlog
        ? { drainedBytesPerSec: backlog.drainBytesPerSec, backlogBytes: backlog.bytes }
        : undefined,
    });
    const points = budgetPointsOf(estimate);
    if (estimate && points !== undefined) {
      this.budget = { points, bytesPerSec: Math.round(estimate.bytesPerSec) };
      this.metrics.budgetPoints.set(points);
      this.metrics.budgetBytes.set(estimate.bytesPerSec);
    }
    if (estimate && now - this.learnedSavedAt >= LEARNED_SAVE_MS) {
      this.learnedSavedAt = now;
      const text = JSON.stringify({
        bytesPerSec: estimate.bytesPerSec,
        maxMeasured: estimate.maxMeasured,
        ...(estimate.pointsPerByte !== undefined ? { pointsPerByte: estimate.pointsPerByte } : {}),
      });
      await this.opts.kv
        .setWithLease(learnedBudgetKey(this.opts.nodeId), text, LEARNED_TTL_MS)
        .catch(() => undefined);
    }
  }

  /** The first sample must succeed: an unreadable source is a configuration error. */
  async start(): Promise<void> {
    await this.opts.sampler.sample();
    await this.restoreLearned();
    this.stopped = false;
    const began = performance.now();
    await this.tick();
    this.schedule(began);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /**
   * The next tick, one period after the last one began (a self-scheduling timeout: the
   * period changes with the pace, and a slow tick never overlaps the next).
   */
  private schedule(lastBegan: number): void {
    if (this.stopped) return;
    const wait = Math.max(0, this.pace.ms - (performance.now() - lastBegan));
    this.timer = setTimeout(() => {
      const began = performance.now();
      // Never let one tick take the feed down: log it and try again next tick.
      this.tick()
        .catch((err: unknown) => this.opts.log.warn({ err }, 'feed tick failed'))
        .finally(() => this.schedule(began));
    }, wait);
  }

  async tick(): Promise<void> {
    const { opts, metrics } = this;
    let bytes: number;
    let backlog: BacklogSample | undefined;
    try {
      metrics.samples.inc();
      bytes = (await opts.sampler.sample()).bytes;
      const sample = opts.backlog ? await opts.backlog() : undefined;
      backlog = sample && { ...sample, targetBytes: opts.targetBytes };
      if (this.failing)
        opts.log.info({ source: opts.sampler.description }, 'memory source readable again');
      this.failing = false;
    } catch (err) {
      metrics.sampleErrors.inc();
      if (!this.failing) {
        opts.log.warn(
          { err: (err as Error).message },
          'memory sample failed; not publishing until it recovers',
        );
      }
      this.failing = true;
      return;
    }
    // Every ten slow ticks, whatever the pace: a fast pace must not multiply store reads.
    const sinceParams = performance.now() - this.paramsCheckedAt;
    if (this.seq === 0 || sinceParams + this.pace.ms / 2 >= 10 * opts.tickMs) {
      this.paramsCheckedAt = performance.now();
      await this.refreshParams();
    }
    await this.learn(bytes, backlog);
    const out = this.law.step({
      t: performance.now() / 1000,
      u: bytes / opts.targetBytes,
      backlog,
    });
    if (out.mode !== this.lastMode) {
      metrics.transitions.inc({ to: out.mode });
      opts.log.warn(
        { node: opts.nodeId, mode: out.mode, u: out.u },
        `pressure mode is now ${out.mode}`,
      );
      this.lastMode = out.mode;
    }
    const report: PressureReport = {
      node: opts.nodeId,
      m: out.m,
      u: out.u,
      uhat: out.uhat,
      mode: out.mode,
      seq: this.seq++,
      ts: Date.now(),
      law: this.law.name,
      ...(this.budget ? { budget: this.budget } : {}),
    };
    metrics.u.set(out.u);
    metrics.uhat.set(out.uhat);
    metrics.m.set(out.m);
    metrics.emergency.set(out.mode === 'emergency' ? 1 : 0);
    this.last = report;
    const wasFast = this.pace.isFast;
    metrics.tick.set(this.pace.update(out) / 1000);
    if (this.pace.isFast !== wasFast) {
      opts.log.info({ tickMs: this.pace.ms, u: out.u, uhat: out.uhat }, 'sampling pace changed');
    }
    const now = performance.now();
    const previous = this.lastPublished;
    const publish = shouldPublish({
      changed: previous !== undefined && (previous.m !== out.m || previous.mode !== out.mode),
      sinceLastPublishMs: previous === undefined ? undefined : now - previous.at,
      tickMs: this.pace.ms,
      slowMs: opts.tickMs,
    });
    if (!publish) return;
    const text = encodeReport(report);
    try {
      // A lease of three slow ticks, whatever the pace: one missed heartbeat is tolerated,
      // a dead feed disappears, and a switch from fast to slow never lets the key lapse.
      // PUBLISH first: gateways apply it within milliseconds; the key is for late joiners.
      await opts.kv.publish(PRESSURE_CHANNEL, text);
      await opts.kv.setWithLease(pressureKey(opts.nodeId), text, 3 * opts.tickMs);
      this.lastPublished = { m: out.m, mode: out.mode, at: now };
      metrics.publishes.inc();
      metrics.lastPublish.set(report.ts / 1000);
    } catch (err) {
      metrics.publishErrors.inc();
      opts.log.warn({ err: (err as Error).message }, 'publishing the pressure report failed');
    }
  }
}

/** Backlog from the reference relay's /stats (backlogBytes, drainedBytesPerSec). */
export function relayBacklog(statsUrl: string): () => Promise<BacklogSample | undefined> {
  return async () => {
    try {
      const res = await fetch(statsUrl, { signal: AbortSignal.timeout(1000) });
      const stats = (await res.json()) as { backlogBytes?: number; drainedBytesPerSec?: number };
      if (typeof stats.backlogBytes !== 'number') return undefined;
      return { bytes: stats.backlogBytes, drainBytesPerSec: stats.drainedBytesPerSec ?? 0 };
    } catch {
      // No data is not maximum pressure: the law then runs on memory alone.
      return undefined;
    }
  };
}
