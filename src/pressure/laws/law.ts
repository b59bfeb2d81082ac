/**
 * What every pressure control law shares: its input and output, and the small pure pieces
 * (time-based filter weight, tick clock, emergency latch, the backlog term, hysteretic
 * quantiser). A law is stepped on a fixed tick by the feed, never per request, and takes its
 * time from the caller, so tests drive it in simulated time.
 */

export type Mode = 'normal' | 'emergency';

export interface BacklogSample {
  /** Bytes accepted by the relay but not yet drained to storage. */
  bytes: number;
  /** Drain rate measured over the last interval; 0 or absent means "not measured yet". */
  drainBytesPerSec: number;
  /** The node's memory target (bytes), to read the backlog against; absent: unknown. */
  targetBytes?: number;
}

export interface LawInput {
  /** Seconds on the caller's monotonic clock. */
  t: number;
  /** Memory of the relay node as a ratio of its target (0.9 = 90% of target). */
  u: number;
  backlog?: BacklogSample;
}

export interface LawOutput {
  /**
   * The multiplier to publish, in [0, 1]. The lead law keeps it in [mMin, 1] on its
   * quantisation grid; the PID comparison law publishes its delay mapped to a share.
   */
  m: number;
  /** The u this step was given. */
  u: number;
  /** The u the law acted on (its prediction; the PID predicts nothing, so u). */
  uhat: number;
  mode: Mode;
  /** Times the law has entered emergency mode since it was created. */
  emergencyEntries: number;
}

export interface ControlLaw {
  /** Its name in registry.ts's table, published with every report. */
  readonly name: string;
  step(input: LawInput): LawOutput;
}

export function clamp(x: number, lo: number, hi: number): number {
  return x < lo ? lo : x > hi ? hi : x;
}

/**
 * Weight of a new sample in an EWMA with time constant `tauSec` after `dtSec`: the filter
 * then behaves the same at any tick rate and across irregular ticks.
 */
export function ewmaWeight(dtSec: number, tauSec: number): number {
  if (dtSec <= 0) return 0;
  if (tauSec <= 0) return 1;
  return 1 - Math.exp(-dtSec / tauSec);
}

/** Seconds since the previous step: 0 on the first, an error if time runs backwards. */
class TickClock {
  private last: number | undefined;

  advance(t: number): number {
    if (!Number.isFinite(t)) throw new RangeError(`law time must be finite, got ${t}`);
    const last = this.last;
    if (last !== undefined && t < last) {
      throw new RangeError(`law time must not go backwards (${t} < ${last})`);
    }
    this.last = t;
    return last === undefined ? 0 : t - last;
  }
}

/** Rejects what a sampler must never hand to a law: a missing or negative memory ratio. */
function checkInput(input: LawInput): void {
  if (!Number.isFinite(input.u) || input.u < 0) {
    throw new RangeError(`law input u must be a finite ratio >= 0, got ${input.u}`);
  }
}

/**
 * A law from its update rule. The frame checks each input and keeps the clock, so a rule
 * only turns an input and the seconds since the last one (0 at first) into an output.
 */
export function lawOf(
  name: ControlLaw['name'],
  update: (input: LawInput, dt: number) => LawOutput,
): ControlLaw {
  const clock = new TickClock();
  return {
    name,
    step(input: LawInput): LawOutput {
      checkInput(input);
      return update(input, clock.advance(input.t));
    },
  };
}

export interface LatchParams {
  /** Enter emergency when u >= this. */
  enterAt: number;
  /** Leave only after u <= this ... */
  exitAt: number;
  /** ... has held this long (0 = leave at once). */
  dwellSec: number;
}

/**
 * Emergency latch with hysteresis in amplitude and in time. It is updated on the tick, so
 * it clears with no traffic at all (a latch that only re-checks on requests while it
 * refuses them never clears).
 */
export class EmergencyLatch {
  mode: Mode = 'normal';
  entries = 0;
  exits = 0;
  private belowSince: number | undefined;

  constructor(private readonly params: LatchParams) {}

  update(t: number, u: number): Mode {
    const { enterAt, exitAt, dwellSec } = this.params;
    if (this.mode === 'normal') {
      if (u >= enterAt) {
        this.mode = 'emergency';
        this.entries++;
        this.belowSince = undefined;
      }
      return this.mode;
    }
    if (u > exitAt) {
      this.belowSince = undefined;
      return this.mode;
    }
    this.belowSince ??= t;
    if (t - this.belowSince >= dwellSec) {
      this.mode = 'normal';
      this.exits++;
      this.belowSince = undefined;
    }
    return this.mode;
  }
}

export interface BacklogLawParams {
  acceptableBacklogBytes: number;
  /** Write rate (bytes/s) that m = 1 lets through: what m multiplies. */
  baseBytesPerSec: number;
  mMin: number;
}

/**
 * The workflow engine's proportional backlog law: m_b = (acceptable / backlog) x drain /
 * base, clamped to [mMin, 1], back to 1 once the backlog is under half the acceptable one.
 * At equilibrium writes match the drain and the backlog sits at the acceptable value.
 * "No data" (no backlog, no drain measured yet) means no pressure from this term, never the
 * minimum: that engine clamped to its minimum after a leader change for exactly that reason.
 */
export function backlogMultiplier(
  backlog: BacklogSample | undefined,
  params: BacklogLawParams,
): number {
  if (!backlog) return 1;
  const { bytes, drainBytesPerSec } = backlog;
  if (!(bytes > 0) || !(drainBytesPerSec > 0) || !Number.isFinite(drainBytesPerSec)) return 1;
  const factor = params.acceptableBacklogBytes / bytes;
  if (factor > 2) return 1;
  return clamp((factor * drainBytesPerSec) / params.baseBytesPerSec, params.mMin, 1);
}

/**
 * Quantise `m` down to the grid (never publish more than was computed), with a deadband on
 * rises: a higher level is taken only once m is `deadband` past it, so a value that wanders
 * across a grid line does not flip the published multiplier every tick. Drops are taken at
 * once; 1 is taken as soon as m is 1.
 */
export function quantiseWithDeadband(
  published: number,
  m: number,
  quantum: number,
  deadband: number,
  floor: number,
): number {
  const grid = (x: number) =>
    Number(Math.max(floor, x >= 1 ? 1 : Math.floor(x / quantum + 1e-9) * quantum).toFixed(6));
  const down = grid(m);
  if (down <= published || m >= 1) return down;
  return Math.max(published, grid(m - deadband));
}
