/**
 * Where the lead law's band starts, learned by probing. A relay's memory holds more than its
 * backlog: a heap that grew in a burst and is never given back, a buffer pool, a cache. Read
 * as pressure, such a plateau pins the multiplier low although writes no longer move memory
 * (measured: three reference relays with 24 MiB of headroom sat at 0.93-1.0 x target with an
 * empty backlog, m at 0.05-0.2, the fleet accepting 0.14 of what it could). Memory alone
 * cannot tell a plateau from a backlog held level by the law; a probe can: raise the band's
 * bottom slowly while memory is flat, keep what memory did not answer with a rise, and give a
 * probe back the moment memory starts rising, waiting twice as long before the next one.
 * Pure: the law hands it each tick's filtered u and slope.
 */
import { clamp } from './law.js';

export interface PlateauProbeParams {
  /** The band's bottom with nothing learned (u). */
  uLo: number;
  /** The band's top with nothing learned (u). */
  uHi: number;
  /**
   * The narrowest band (u): a bottom closer to uHi than this takes the top with it, up to
   * uCeil (memory flat above the target that writes do not move is no reason to refuse them;
   * the emergency latch still stands above).
   */
  minWidthU: number;
  uCeil: number;
  /**
   * The first probe's step, as the multiplier it adds where memory is now; each step that
   * holds doubles the next.
   */
  firstStepM: number;
  /** The window a step is judged over (s): one step per window at most. */
  windowSec: number;
  /** The band maps its bottom to 1 and its top to this. */
  mMin: number;
  /**
   * A step is kept when it raised the window's mean multiplier by at least this share of what
   * it would raise it by over a plateau (memory not moving), and by at least minGainM.
   */
  keepShare: number;
  minGainM: number;
  /**
   * A step is answered too when memory's mean over the window rose this much over the last
   * window's (u): a slow plant answers in memory before the band gives the multiplier back.
   * A collector's teeth move the window's peak and trough, much less its mean.
   */
  riseU: number;
  /** No probe while the mean multiplier is at least this: there is nothing to win. */
  enoughM: number;
  /**
   * Probe where the relay tells nothing of its backlog, judging by m and memory alone. Off,
   * only a relay that says it keeps up (its backlog under a second of its drain) is probed.
   */
  blind: boolean;
  /** The wait after a probe memory answered, doubled after each such probe up to ... */
  backoffSec: number;
  /** ... this long (s). */
  maxBackoffSec: number;
}

/**
 * The answer is read in the multiplier, not in memory: over a backlog held level by the law,
 * a higher bottom lets more writes in, memory rises until the band gives the same multiplier
 * back (admitted = drained), and the window's mean m is where it was; over a plateau, memory
 * does not move and m stays higher. Teeth of a collector's saw-tooth move both windows alike.
 */
/** The share of a window's ticks the relay must have answered for its word to count. */
const TOLD_SHARE = 0.8;

/** A band of u: full quota at or below lo, mMin at or above hi. */
export interface Band {
  lo: number;
  hi: number;
}

/** The scaled trigger: 1 below the band, mMin above it, linear between. */
export function bandMultiplier(u: number, band: Band, mMin: number): number {
  return 1 - (1 - mMin) * clamp((u - band.lo) / (band.hi - band.lo), 0, 1);
}

export class PlateauProbe {
  /** How far above uLo the band starts now. */
  private trim = 0;
  /** The highest trim that raised the multiplier. */
  private kept = 0;
  private step: number;
  private windowStart: number | undefined;
  private sumM = 0;
  private sumU = 0;
  private lastMeanU: number | undefined;
  private sumT = 0;
  private lastMeanM: number | undefined;
  /** What the step under test raises m by if memory does not move. */
  private expectedGain = 0;
  private nextProbeAt = 0;
  private backoff: number;
  /** Ticks in this window with the relay's word on its backlog, and those it kept up in. */
  private told = 0;
  private keptUp = 0;
  private ticks = 0;

  constructor(private readonly p: PlateauProbeParams) {
    this.step = p.firstStepM;
    this.backoff = p.backoffSec;
  }

  /**
   * The band after this tick, given the filtered u, the multiplier it made, and whether the
   * relay keeps up with its writes (undefined: it does not say).
   */
  update(t: number, dt: number, ubar: number, m: number, keepingUp?: boolean): Band {
    const { p } = this;
    this.windowStart ??= t;
    this.ticks++;
    if (keepingUp !== undefined) this.told++;
    if (keepingUp === true) this.keptUp++;
    this.sumM += m * dt;
    this.sumU += ubar * dt;
    this.sumT += dt;
    if (t - this.windowStart >= p.windowSec && this.sumT > 0) this.closeWindow(t, ubar);
    // A plateau that went away takes the bottom with it.
    this.trim = clamp(this.trim, 0, this.most(ubar));
    this.kept = Math.min(this.kept, this.trim);
    return this.band(p.uLo + this.trim);
  }

  private band(lo: number): Band {
    return { lo, hi: Math.max(this.p.uHi, lo + this.p.minWidthU) };
  }

  /** The band's multiplier at u with its bottom at `bottom`. */
  private mAt(u: number, bottom: number): number {
    return bandMultiplier(u, this.band(bottom), this.p.mMin);
  }

  /** The bottom that maps u to m. */
  private bottomFor(u: number, m: number): number {
    const { p } = this;
    const x = (1 - m) / (1 - p.mMin);
    if (x >= 1) return u;
    const under = (u - x * p.uHi) / (1 - x);
    return under + p.minWidthU <= p.uHi ? under : u - x * p.minWidthU;
  }

  /** The highest trim: the bottom never above the filtered memory, the top never past uCeil. */
  private most(ubar: number): number {
    const { p } = this;
    return Math.max(0, Math.min(ubar - p.uLo, p.uCeil - p.minWidthU - p.uLo));
  }

  private closeWindow(t: number, ubar: number): void {
    const { p } = this;
    const meanM = this.sumM / this.sumT;
    const meanU = this.sumU / this.sumT;
    const last = this.lastMeanM;
    // The relay's word, when it gave it on most ticks (a busy relay misses a read now and
    // then), settles a probe: it kept up on every tick it answered; else m and memory do.
    const told = this.told >= TOLD_SHARE * this.ticks;
    const keptUp = told && this.keptUp === this.told;
    const judged = told || p.blind;
    if (this.trim > this.kept && last !== undefined && judged) {
      const needed = Math.max(p.minGainM, p.keepShare * this.expectedGain);
      const rose = this.lastMeanU !== undefined && meanU > this.lastMeanU + p.riseU;
      const answered = told ? !keptUp : rose || meanM < last + needed;
      if (answered) {
        // Answered: writes move memory here. Back to what held, and wait longer next time.
        this.trim = this.kept;
        this.step = p.firstStepM;
        this.nextProbeAt = t + this.backoff;
        this.backoff = Math.min(2 * this.backoff, p.maxBackoffSec);
      } else {
        // The step held: keep it, and take one twice as long next (a plateau is climbed in a
        // few steps; a backlog held level answers the first small one).
        this.kept = this.trim;
        this.step *= 2;
        this.backoff = p.backoffSec;
      }
    }
    const calm = told ? keptUp : p.blind;
    if (
      p.firstStepM > 0 &&
      calm &&
      this.trim === this.kept &&
      last !== undefined &&
      meanM < p.enoughM &&
      t >= this.nextProbeAt
    ) {
      const from = this.mAt(ubar, p.uLo + this.trim);
      const bottom = this.bottomFor(ubar, Math.min(1, from + this.step));
      this.trim = Math.min(bottom - p.uLo, this.most(ubar));
      this.expectedGain = this.mAt(ubar, p.uLo + this.trim) - from;
    }
    this.lastMeanM = meanM;
    this.lastMeanU = meanU;
    this.sumM = 0;
    this.sumU = 0;
    this.sumT = 0;
    this.told = 0;
    this.keptUp = 0;
    this.ticks = 0;
    this.windowStart = t;
  }
}
