/**
 * The feed's sampling rate: slow while memory is far from its target, fast as pressure
 * rises, so a sudden rise is seen (and its slope acted on) within tens of milliseconds
 * instead of half a second. Pure: the feed hands it each law output and waits what it says.
 */

export interface TickPaceParams {
  /** The tick at rest (ms); also what publication and the report's lease follow. */
  slowMs: number;
  /** The tick under pressure (ms); equal to slowMs turns the fast pace off. */
  fastMs: number;
  /** Go fast when u or uhat reaches this share of the target ... */
  fastAbove: number;
  /** ... and back to slow only once both are below this (hysteresis: no flapping). */
  slowBelow: number;
}

/** Fast above 0.7 x target (where the lead law's band starts), slow again below 0.6. */
export const DEFAULT_FAST_TICK_MS = 50;
export const DEFAULT_FAST_ABOVE = 0.7;
export const PACE_HYSTERESIS = 0.1;

export function validatePace(p: TickPaceParams): void {
  if (!(Number.isInteger(p.slowMs) && p.slowMs > 0)) {
    throw new RangeError(`tick: ${p.slowMs} ms is not a positive integer`);
  }
  if (!(Number.isInteger(p.fastMs) && p.fastMs > 0 && p.fastMs <= p.slowMs)) {
    throw new RangeError(`fast tick: ${p.fastMs} ms must be a positive integer <= the tick`);
  }
  if (!(p.fastAbove > 0) || !(p.slowBelow >= 0 && p.slowBelow <= p.fastAbove)) {
    throw new RangeError('fast tick: need 0 <= slowBelow <= fastAbove and fastAbove > 0');
  }
}

/** The pace from explicit flags: back to slow PACE_HYSTERESIS below the fast threshold. */
export function paceParams(slowMs: number, fastMs: number, fastAbove: number): TickPaceParams {
  const p = { slowMs, fastMs, fastAbove, slowBelow: Math.max(0, fastAbove - PACE_HYSTERESIS) };
  validatePace(p);
  return p;
}

export class TickPace {
  private fast = false;

  constructor(readonly params: TickPaceParams) {
    validatePace(params);
  }

  get isFast(): boolean {
    return this.fast;
  }

  /** The current tick (ms). */
  get ms(): number {
    return this.fast ? this.params.fastMs : this.params.slowMs;
  }

  /**
   * Update from the law's last output and return the next tick (ms). The larger of u and
   * uhat counts: uhat leads on a rising slope, u on a spike the filter has not caught up
   * with yet. An emergency is always fast.
   */
  update(out: { u: number; uhat: number; mode: string }): number {
    const level = Math.max(out.u, out.uhat);
    if (out.mode === 'emergency' || level >= this.params.fastAbove) this.fast = true;
    else if (level < this.params.slowBelow) this.fast = false;
    return this.ms;
  }
}

/**
 * Whether a report goes out: always at the slow pace, and under the fast one when the
 * multiplier or mode changed, else once per slow tick (within half a fast tick): gateways
 * need changes at once and a heartbeat, not twenty copies of one value a second.
 */
export function shouldPublish(o: {
  changed: boolean;
  sinceLastPublishMs: number | undefined;
  tickMs: number;
  slowMs: number;
}): boolean {
  if (o.changed || o.sinceLastPublishMs === undefined) return true;
  return o.sinceLastPublishMs + o.tickMs / 2 >= o.slowMs;
}
