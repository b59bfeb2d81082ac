/** The figures a simulation reports, from its raw tallies: small pure functions. */
import type { WindowTally } from './ledger.js';

/** Counts by value (latencies rounded to the clock's tick): exact percentiles, little memory. */
export class CountHistogram {
  readonly counts = new Map<number, number>();
  total = 0;

  add(value: number): void {
    this.counts.set(value, (this.counts.get(value) ?? 0) + 1);
    this.total++;
  }

  /** The value at quantile q in [0, 1] (nearest rank); NaN when empty. */
  quantile(q: number): number {
    if (this.total === 0) return NaN;
    const rank = Math.max(1, Math.ceil(q * this.total));
    let seen = 0;
    for (const v of [...this.counts.keys()].sort((a, b) => a - b)) {
      seen += this.counts.get(v)!;
      if (seen >= rank) return v;
    }
    return NaN;
  }
}

/** Over- and under-admission over every window, checked against the bounds. */
export interface AccuracyTally {
  windows: number;
  /** Windows admitted over their limit, the points over, the most in one window. */
  overWindows: number;
  overPoints: number;
  maxOver: number;
  /** Windows over their own bound, or with points Valkey never granted (must stay 0). */
  overBoundBroken: number;
  /** The largest over / bound seen (0 when nothing was over). */
  worstOverShare: number;
  /** Complete windows, and the points asked for within the limit but refused. */
  completeWindows: number;
  underPoints: number;
  /** min(limit, demanded) summed over complete windows: what under is a share of. */
  admissible: number;
  maxUnder: number;
  underBoundBroken: number;
  admitted: number;
  insured: number;
  lost: number;
}

export function emptyAccuracy(): AccuracyTally {
  return {
    windows: 0,
    overWindows: 0,
    overPoints: 0,
    maxOver: 0,
    overBoundBroken: 0,
    worstOverShare: 0,
    completeWindows: 0,
    underPoints: 0,
    admissible: 0,
    maxUnder: 0,
    underBoundBroken: 0,
    admitted: 0,
    insured: 0,
    lost: 0,
  };
}

/** Points over the limit in one window. */
export function overOf(w: WindowTally, limit: number): number {
  return Math.max(0, w.admitted - limit);
}

/** Points refused in one window that the limit had room for. */
export function underOf(w: WindowTally, limit: number): number {
  return Math.max(0, Math.min(limit, w.demanded) - w.admitted);
}

/** Add one window to the tally, with the bounds it is held to. */
export function addWindow(
  a: AccuracyTally,
  w: WindowTally,
  complete: boolean,
  limit: number,
  overBound: number,
  underBound: number,
): void {
  a.windows++;
  a.admitted += w.admitted;
  a.insured += w.insured;
  a.lost += w.lost;
  // A point Valkey never granted, and no insured share admitted, breaks the contract alone.
  if (w.ungranted > 0) a.overBoundBroken++;
  const over = overOf(w, limit);
  if (over > 0) {
    a.overWindows++;
    a.overPoints += over;
    a.maxOver = Math.max(a.maxOver, over);
    a.worstOverShare = Math.max(a.worstOverShare, overBound > 0 ? over / overBound : Infinity);
    if (over > overBound) a.overBoundBroken++;
  }
  if (!complete) return;
  a.completeWindows++;
  const under = underOf(w, limit);
  a.admissible += Math.min(limit, w.demanded);
  a.underPoints += under;
  a.maxUnder = Math.max(a.maxUnder, under);
  // Windows with insured admissions or lost points are judged by the over bound only.
  if (under > underBound && w.insured === 0 && w.lost === 0) a.underBoundBroken++;
}

/** Mean and largest of a list (0 for an empty one). */
export function meanMax(values: readonly number[]): { mean: number; max: number } {
  if (values.length === 0) return { mean: 0, max: 0 };
  let sum = 0;
  let max = -Infinity;
  for (const v of values) {
    sum += v;
    if (v > max) max = v;
  }
  return { mean: sum / values.length, max };
}

/** One window over its limit, for the result file's list of the worst. */
export interface OverWindow {
  key: string;
  /** Milliseconds into the run the window started, and its length. */
  startMs: number;
  spanMs: number;
  admitted: number;
  over: number;
  bound: number;
  lost: number;
  insured: number;
}

/** Keep the `n` windows most over their limit (worst first). */
export function keepWorst(list: OverWindow[], w: OverWindow, n: number): void {
  if (list.length >= n && w.over <= list[list.length - 1]!.over) return;
  list.push(w);
  list.sort((a, b) => b.over - a.over);
  if (list.length > n) list.pop();
}
