/**
 * What a relay node drains, learned from the node itself: the feed's estimate of the write
 * bytes per second the node sustains, which gateways turn into its write budget (issue 30).
 * Pure, with time passed in (seconds on a monotonic clock): tested with generated histories.
 *
 * Inputs, per feed tick: the bytes every gateway admitted to the node so far (a cumulative
 * counter; see admitted.ts), the node's memory, and, where the relay exports it, its own
 * measured drain and backlog (the reference relay's /stats: drainedBytesPerSec, backlogBytes).
 * Never what was offered: a write a gateway refused is not an input at all.
 *
 * Over a short window (windowSec) each tick measures
 *   A = admitted bytes/s, S = memory slope (bytes/s, least squares over the window's samples),
 *   d = A - max(0, S): the node took A and kept S of it, so it drained at least d
 *   and over the long window A_long - max(0, R), R the rise of memory's lower envelope (see
 *   below: a saw-tooth whose troughs stay level kept nothing of what it took)
 *   (where the relay exports its drain, that figure replaces both: its drain while its backlog
 *   stayed above 0 the whole window is a measurement of capacity, and with no backlog what
 *   it drained is a lower bound; memory need not follow a relay's backlog byte for byte).
 *
 * The bounds (each one an invariant the property tests hold):
 * - Up: the estimate only ever rises to a rate measured draining (E = max(E, d)), and only
 *   from a window in which memory stayed under ceilingBytes (the target); it is never
 *   above the highest of them (nor above the value it was restored from). A quiet hour
 *   (nothing admitted, memory flat) measures d = 0 and changes nothing: no drift up, and no
 *   decay either, since silence says nothing about what the node can take.
 * - Down: only a sustained rise of memory lowers it: the slope over the long window
 *   (longWindowSec, by the lower envelope: the minimum of its later half less that of its
 *   earlier half, so a garbage collector's saw-tooth inside the window reads as flat) above
 *   flatBytesPerSec, the short-window slope above it too (rising now), while more than the
 *   estimate was admitted over the long window (A_long > E: at m = 1, where the budget is
 *   not in force; a budget that holds writes to E x m <= E never qualifies). The target is
 *   what that window measured draining (A_long - S_long); the estimate moves there at most at
 *   1/tauDownSec of the gap per second, and never below floorShare of the highest rate ever
 *   measured nor below minBytesPerSec. A flood the gateways refuse keeps what is admitted at
 *   or under the budget, which the node drains, so memory does not rise and nothing lowers it.
 * - No data: before anything was admitted the estimate is undefined (the gateways then apply
 *   only a configured writeBudget, as before), never a minimum. Admitted writes but nothing
 *   measured draining yet (memory rising faster than the writes, as nostr-rs-relay's does
 *   until it falls back): provisionally the highest rate admitted over a window, which the
 *   first measurement continues from (still never above what was admitted). A restarted feed restores its last
 *   estimate and highest measured rate (restore()); a gap in the inputs (a counter that went
 *   backwards, a missing sample) restarts the windows, not the estimate.
 */

export interface DrainEstimatorParams {
  /** The short window a measurement is taken over (s). */
  windowSec: number;
  /** The long window a decrease needs (s): longer than the relay's GC saw-tooth. */
  longWindowSec: number;
  /** Memory rising slower than this (bytes/s) is flat: allocation noise, not accumulation. */
  flatBytesPerSec: number;
  /** Time constant of a decrease (s): at most 1/tau of the gap per second. */
  tauDownSec: number;
  /** A decrease never goes below this share of the highest rate measured draining. */
  floorShare: number;
  /** ... nor below this (bytes/s). */
  minBytesPerSec: number;
  /**
   * Memory the node must stay under while it takes a rate for that rate to count as
   * sustained (the feed's target): a window whose memory went above it measures nothing
   * upward. Infinity: no ceiling.
   */
  ceilingBytes: number;
}

export const DEFAULT_DRAIN_ESTIMATOR_PARAMS: Readonly<DrainEstimatorParams> = {
  windowSec: 5,
  longWindowSec: 40,
  flatBytesPerSec: 64 * 1024,
  tauDownSec: 30,
  floorShare: 0.25,
  minBytesPerSec: 16 * 1024,
  ceilingBytes: Number.POSITIVE_INFINITY,
};

/** One tick's inputs. */
export interface DrainObservation {
  /** Seconds, monotonic. */
  t: number;
  /** Bytes admitted to the node by all gateways so far (cumulative; a decrease is a reset). */
  admittedBytes: number;
  /** Write points admitted so far (cumulative, same counter): converts bytes into points. */
  admittedPoints: number;
  /** The node's memory (bytes). */
  memoryBytes: number;
  /** The relay's own measured drain and backlog, where it exports them. */
  relay?: { drainedBytesPerSec: number; backlogBytes: number } | undefined;
}

export interface DrainEstimate {
  /** Write bytes per second the node sustains. */
  bytesPerSec: number;
  /** The highest rate ever measured draining (the cap of the estimate). */
  maxMeasured: number;
  /** Write points per byte admitted lately (undefined before any write was counted). */
  pointsPerByte: number | undefined;
}

interface Sample {
  t: number;
  bytes: number;
  points: number;
  mem: number;
  relay: DrainObservation['relay'];
}

function validate(p: DrainEstimatorParams): void {
  const positive: (keyof DrainEstimatorParams)[] = [
    'windowSec',
    'longWindowSec',
    'tauDownSec',
    'minBytesPerSec',
  ];
  for (const k of positive) {
    if (!(p[k] > 0 && Number.isFinite(p[k]))) throw new RangeError(`estimator: ${k} must be > 0`);
  }
  if (!(p.flatBytesPerSec >= 0)) throw new RangeError('estimator: flatBytesPerSec must be >= 0');
  if (!(p.floorShare > 0 && p.floorShare <= 1)) {
    throw new RangeError('estimator: floorShare must be in (0, 1]');
  }
  if (!(p.ceilingBytes > 0)) throw new RangeError('estimator: ceilingBytes must be > 0');
  if (p.longWindowSec < p.windowSec) {
    throw new RangeError('estimator: longWindowSec must be >= windowSec');
  }
}

const finite = (x: number) => typeof x === 'number' && Number.isFinite(x);

/** Least-squares slope of memory over samples (bytes/s); 0 with fewer than two. */
function slope(samples: readonly Sample[]): number {
  const n = samples.length;
  if (n < 2) return 0;
  let st = 0;
  let sm = 0;
  for (const s of samples) {
    st += s.t;
    sm += s.mem;
  }
  const mt = st / n;
  const mm = sm / n;
  let num = 0;
  let den = 0;
  for (const s of samples) {
    num += (s.t - mt) * (s.mem - mm);
    den += (s.t - mt) ** 2;
  }
  return den > 0 ? num / den : 0;
}

/** Slope of the lower envelope: min of the later half less min of the earlier half, per s. */
function envelopeSlope(samples: readonly Sample[]): number {
  const first = samples[0]!;
  const last = samples[samples.length - 1]!;
  const mid = (first.t + last.t) / 2;
  let early = Infinity;
  let late = Infinity;
  for (const s of samples) {
    if (s.t <= mid) early = Math.min(early, s.mem);
    else late = Math.min(late, s.mem);
  }
  if (!Number.isFinite(early) || !Number.isFinite(late)) return 0;
  return (late - early) / ((last.t - first.t) / 2);
}

export class DrainEstimator {
  private readonly p: DrainEstimatorParams;
  private samples: Sample[] = [];
  private estimate: number | undefined;
  private max = 0;
  private ratio: number | undefined;
  /** Something was measured draining (or restored): no more provisional rises. */
  private measuredOnce = false;
  private lastT: number | undefined;

  constructor(params: Partial<DrainEstimatorParams> = {}) {
    this.p = { ...DEFAULT_DRAIN_ESTIMATOR_PARAMS, ...params };
    validate(this.p);
  }

  get params(): Readonly<DrainEstimatorParams> {
    return this.p;
  }

  /**
   * Resume from a persisted estimate (a restarted feed). Ignored unless both are finite and
   * positive, and only before the first observation.
   */
  restore(saved: { bytesPerSec: number; maxMeasured: number; pointsPerByte?: number }): void {
    if (this.lastT !== undefined) return;
    if (!(finite(saved.bytesPerSec) && finite(saved.maxMeasured))) return;
    if (!(saved.bytesPerSec > 0 && saved.maxMeasured >= saved.bytesPerSec)) return;
    this.estimate = saved.bytesPerSec;
    this.max = saved.maxMeasured;
    this.measuredOnce = true;
    const ratio = saved.pointsPerByte;
    if (ratio !== undefined && finite(ratio) && ratio > 0 && ratio <= 1) this.ratio = ratio;
  }

  /** The estimate now; undefined until something was measured (or restored). */
  value(): DrainEstimate | undefined {
    if (this.estimate === undefined) return undefined;
    return { bytesPerSec: this.estimate, maxMeasured: this.max, pointsPerByte: this.ratio };
  }

  /** Take one tick's inputs; returns the estimate after it. */
  observe(o: DrainObservation): DrainEstimate | undefined {
    const bad =
      !finite(o.t) ||
      !finite(o.admittedBytes) ||
      !finite(o.admittedPoints) ||
      !finite(o.memoryBytes) ||
      o.admittedBytes < 0 ||
      o.admittedPoints < 0 ||
      o.memoryBytes < 0;
    if (bad) return this.value(); // not a measurement; keep what is known
    const prev = this.samples[this.samples.length - 1];
    const relay =
      o.relay && finite(o.relay.drainedBytesPerSec) && finite(o.relay.backlogBytes)
        ? o.relay
        : undefined;
    // Time that does not move forward, or a counter that went back (expired, Valkey restarted):
    // the windows start again from here, the estimate stays.
    if (
      (this.lastT !== undefined && o.t <= this.lastT) ||
      (prev && (o.admittedBytes < prev.bytes || o.admittedPoints < prev.points))
    ) {
      this.samples = [];
    }
    this.lastT = Math.max(o.t, this.lastT ?? o.t);
    this.samples.push({
      t: o.t,
      bytes: o.admittedBytes,
      points: o.admittedPoints,
      mem: o.memoryBytes,
      relay,
    });
    const horizon = o.t - this.p.longWindowSec;
    let drop = 0;
    while (drop < this.samples.length - 1 && this.samples[drop + 1]!.t <= horizon) drop++;
    if (drop > 0) this.samples.splice(0, drop);

    const short = this.window(this.p.windowSec);
    if (!short) return this.value();
    const { A, S, dt } = short;
    const bytes = this.samples[this.samples.length - 1]!.bytes - short.first.bytes;
    const points = this.samples[this.samples.length - 1]!.points - short.first.points;
    if (bytes > 0 && points >= 0) this.ratio = points / bytes;

    // What the short window measured draining: the relay's own figure where it exports one
    // over the whole window (memory need not follow its backlog byte for byte), else what
    // was admitted less what memory kept of it.
    // A rate the node took only by going over its target is not one it sustains (a relay whose
    // memory grows with the rate and falls back later, as nostr-rs-relay's saw-tooth).
    const over = (samples: readonly Sample[]) => samples.some((x) => x.mem > this.p.ceilingBytes);
    let measured = over(short.samples) ? 0 : Math.max(0, A - Math.max(0, S));
    let capacity: number | undefined; // a measurement of capacity itself (relay backlog held)
    const relays = short.samples.map((s) => s.relay);
    const byRelay = relays.every((r) => r !== undefined);
    if (byRelay) {
      const drained = relays.reduce((sum, r) => sum + r.drainedBytesPerSec, 0) / relays.length;
      const backlogged = relays.every((r) => r.backlogBytes > 0);
      measured = Math.max(0, drained);
      if (backlogged && drained > 0) capacity = drained;
    }
    // And over the long window by memory's lower envelope: a relay whose memory saw-tooths
    // (a garbage collector, a cache) keeps none of what it took if its troughs stay level,
    // however its 5 s windows rise and fall.
    const long = this.window(this.p.longWindowSec, true);
    const rise = long && !byRelay ? envelopeSlope(long.samples) : 0;
    if (long && !byRelay && !over(long.samples)) {
      measured = Math.max(measured, long.A - Math.max(0, rise));
    }
    if (measured > 0) {
      this.measuredOnce = true;
      this.max = Math.max(this.max, measured);
      this.estimate = Math.max(this.estimate ?? 0, measured);
    } else if (!this.measuredOnce && !byRelay && A > 0) {
      // Nothing measured draining yet (a relay whose memory rises faster than it is written
      // to, and has not fallen back yet): provisionally, the highest rate it was given over
      // a window. Scaled by m, that is an aggregate throttle on whatever floods the node;
      // never "no data, so the minimum", and never "no data, so no budget".
      this.estimate = Math.max(this.estimate ?? 0, A);
    }
    if (this.estimate === undefined) return undefined;

    // Down: the relay's backlog says its capacity, or memory rose over the long window.
    let target: number | undefined = capacity;
    // Only while the node was given more than the estimate (A_long > E): a flood the gateways
    // hold to the budget (E x m <= E) is never evidence that the node drains less, whatever
    // its memory does; a rise with less admitted than that is noise, readers, anything else.
    if (
      target === undefined &&
      !byRelay &&
      long &&
      long.A > this.estimate &&
      S > this.p.flatBytesPerSec &&
      rise > this.p.flatBytesPerSec
    ) {
      target = Math.max(0, long.A - rise);
    }
    if (target !== undefined && target < this.estimate) {
      // A floor bounds a fall; it never lifts an estimate that is already under it.
      const floor = Math.min(
        this.estimate,
        Math.max(this.p.minBytesPerSec, this.p.floorShare * this.max),
      );
      const step = (this.estimate - target) * Math.min(1, dt / this.p.tauDownSec);
      this.estimate = Math.max(floor, Math.min(this.estimate, this.estimate - step));
    }
    return this.value();
  }

  /**
   * The samples of the last `sec` seconds, if they span at least 0.8 of it (`full`: all of
   * it, less half a tick), with the admitted rate and memory slope over them; dt is the time
   * since the previous tick.
   */
  private window(sec: number, full = false) {
    const last = this.samples[this.samples.length - 1]!;
    const from = last.t - sec;
    let i = this.samples.length - 1;
    while (i > 0 && this.samples[i - 1]!.t >= from) i--;
    const samples = this.samples.slice(i);
    const first = samples[0]!;
    const span = last.t - first.t;
    if (samples.length < 3 || span < (full ? 0.9 : 0.8) * sec) return undefined;
    const prev = this.samples[this.samples.length - 2]!;
    return {
      samples,
      first,
      A: (last.bytes - first.bytes) / span,
      S: slope(samples),
      dt: last.t - prev.t,
    };
  }
}

/**
 * The budget leaves this much room above the rate measured draining. The estimate only rises
 * to what was admitted, and a budget exactly at it never admits more: one learned low (at a
 * flood's first second, from a relay that had been quiet) would hold the node there for good
 * (measured: 6 events/s for a relay that drains 64, while the law cut m to 0.6-0.95). With
 * room, a node that keeps up is admitted more, measured draining more, and the estimate
 * climbs by half each window; one that does not, shows it in memory, and the law cuts m.
 */
export const BUDGET_ROOM = 1.5;

/**
 * The budget in write points per second a gateway applies: bytes/s x points per byte x
 * BUDGET_ROOM, on a grid of two significant figures (so the gateways' counters do not change
 * with every tick), at least 1. Undefined when nothing converts it yet.
 */
export function budgetPointsOf(e: DrainEstimate | undefined): number | undefined {
  if (!e || e.pointsPerByte === undefined || !(e.pointsPerByte > 0)) return undefined;
  const raw = e.bytesPerSec * e.pointsPerByte * BUDGET_ROOM;
  if (!Number.isFinite(raw) || raw <= 0) return undefined;
  return Math.max(1, twoFigures(raw));
}

/** Round down to two significant figures (1234 -> 1200, 57.9 -> 57). */
export function twoFigures(x: number): number {
  if (x < 100) return Math.floor(x);
  const scale = 10 ** (Math.floor(Math.log10(x)) - 1);
  return Math.floor(x / scale) * scale;
}
