/**
 * The step-response figures (issue 30, part 3), as pure functions of a recorded series: how a
 * closed loop tracks its memory target after a disturbance. Nothing here measures or waits;
 * `sluice bench step` records the series, the unit tests feed made-up ones.
 *
 * Definitions (u = memory / target, so 1.0 is the target and 0.05 is 5% of it):
 * - **overshoot**: the highest u from the disturbance's onset to the window's end (peak /
 *   target), and when it was reached.
 * - **steady value**: the median of u (and of m) over the window's last `steadySec` seconds.
 * - **settling time**: the time from the onset until u enters the band steady value ± `band`
 *   (± 5% of target) and stays inside it to the end of the window. The loop has settled only
 *   if that final stretch covers the whole steady window (the last `steadySec` seconds);
 *   otherwise it did not settle, and the figure is null with the reason (never a number made
 *   up to fill the cell). 0 when u never left the band after the onset.
 * - **steady-state error**: steady u - 1 (negative: held below target), only once settled.
 * - **time to 90% accepted**: from `recoverFrom` (the onset, or the end of a disturbance that
 *   ends, such as a held allocation released), the time until the accepted write rate,
 *   averaged over the trailing `rateWindowSec` seconds (none of them before `recoverFrom`), is
 *   at or above `recoverRatePerSec` (90% of what the node sustains after the disturbance, or
 *   of what is offered if less) and stays there to the end of the window, for at least
 *   `holdSec`. 0 when it never fell below; null, with the reason, when it is below at the end
 *   or was above for less than `holdSec`.
 */

export interface StepSeries {
  /** Seconds since the arm started. */
  t: number[];
  /** Memory / target. */
  u: number[];
  /** The multiplier applied (the first gateway's). */
  m: number[];
  /** Writes accepted so far (cumulative), at each t. */
  accepted: number[];
}

export interface StepWindow {
  /** When the disturbance starts (s). */
  onset: number;
  /** When the window ends (s); samples after it are left out. */
  end: number;
  /** When recovery is timed from: the onset, or when the disturbance ended. */
  recoverFrom: number;
  /** 90% of the sustainable rate after the disturbance (or of the offer, if less), writes/s. */
  recoverRatePerSec: number;
}

export interface FigureOptions {
  /** Half-width of the settling band, in units of target (0.05: ±5% of target). */
  band: number;
  /** The steady window: the last this many seconds of the window. */
  steadySec: number;
  /** The accepted rate is averaged over this many trailing seconds. */
  rateWindowSec: number;
  /** The final stretch at or above the recovery rate must last at least this long. */
  holdSec: number;
}

export const FIGURE_DEFAULTS: FigureOptions = {
  band: 0.05,
  steadySec: 10,
  // A per-second quota scaled by a multiplier on a 0.05 grid admits in steps: over 2 s the
  // rate at steady state still swings by a step or two, over 5 s it is the rate.
  rateWindowSec: 5,
  holdSec: 5,
};

/** A figure, or null with why not. */
export interface Figure {
  value: number | null;
  why: string | null;
}

export interface StepFigures {
  /** Peak u after the onset (peak memory / target). */
  peakOverTarget: number | null;
  /** Seconds from the onset to the peak. */
  peakAtSec: number | null;
  /** Medians over the steady window (null when the window has too few samples). */
  steadyU: number | null;
  steadyM: number | null;
  /** u's spread (max - min) over the steady window. */
  steadyUSpread: number | null;
  settleSec: Figure;
  /** steadyU - 1, once settled. */
  steadyStateError: Figure;
  recover90Sec: Figure;
  /** The accepted rate over the steady window (writes/s). */
  steadyAcceptedPerSec: number | null;
}

const fixed = (x: number, d = 2) => x.toFixed(d);

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** Indices of the samples inside (onset, end]. */
function windowIndices(series: StepSeries, w: StepWindow): number[] {
  const out: number[] = [];
  for (let i = 0; i < series.t.length; i++) {
    const t = series.t[i]!;
    if (t > w.onset && t <= w.end && Number.isFinite(series.u[i]!)) out.push(i);
  }
  return out;
}

/** The figures of one disturbance. */
export function stepFigures(
  series: StepSeries,
  w: StepWindow,
  options: Partial<FigureOptions> = {},
): StepFigures {
  const o = { ...FIGURE_DEFAULTS, ...options };
  const idx = windowIndices(series, w);
  const none = (why: string): Figure => ({ value: null, why });
  if (idx.length < 3) {
    const why = `${idx.length} samples after the onset`;
    return {
      peakOverTarget: null,
      peakAtSec: null,
      steadyU: null,
      steadyM: null,
      steadyUSpread: null,
      settleSec: none(why),
      steadyStateError: none(why),
      recover90Sec: none(why),
      steadyAcceptedPerSec: null,
    };
  }
  let peak = idx[0]!;
  for (const i of idx) if (series.u[i]! > series.u[peak]!) peak = i;
  const last = idx[idx.length - 1]!;
  const tLast = series.t[last]!;
  const steadyIdx = idx.filter((i) => series.t[i]! >= tLast - o.steadySec);
  const enough = steadyIdx.length >= 3 && tLast - w.onset >= o.steadySec;
  const steadyU = enough ? median(steadyIdx.map((i) => series.u[i]!)) : null;
  const steadyM = enough ? median(steadyIdx.map((i) => series.m[i]!)) : null;
  const steadyUs = steadyIdx.map((i) => series.u[i]!);
  const steadyUSpread = enough ? Math.max(...steadyUs) - Math.min(...steadyUs) : null;
  const first = steadyIdx[0]!;
  const steadyAcceptedPerSec =
    enough && series.t[last]! > series.t[first]!
      ? (series.accepted[last]! - series.accepted[first]!) / (series.t[last]! - series.t[first]!)
      : null;

  let settleSec: Figure;
  if (steadyU === null) {
    settleSec = none(`the window after the onset is shorter than ${o.steadySec} s`);
  } else {
    // The final stretch inside the band, walking back from the last sample.
    let k = idx.length;
    while (k > 0 && Math.abs(series.u[idx[k - 1]!]! - steadyU) <= o.band) k--;
    const stretchFrom = k < idx.length ? idx[k]! : null;
    if (stretchFrom === null || stretchFrom > first) {
      const inWindow = steadyUs;
      settleSec = none(
        `u did not stay within ±${o.band} of ${fixed(steadyU)} over the last ${o.steadySec} s ` +
          `(${fixed(Math.min(...inWindow))}-${fixed(Math.max(...inWindow))})`,
      );
    } else {
      settleSec = { value: k === 0 ? 0 : series.t[stretchFrom]! - w.onset, why: null };
    }
  }
  const steadyStateError: Figure =
    settleSec.value !== null && steadyU !== null
      ? { value: steadyU - 1, why: null }
      : none('not settled');

  return {
    peakOverTarget: series.u[peak]!,
    peakAtSec: series.t[peak]! - w.onset,
    steadyU,
    steadyM,
    steadyUSpread,
    settleSec,
    steadyStateError,
    recover90Sec: recoverTime(series, w, o),
    steadyAcceptedPerSec,
  };
}

/** Accepted writes/s over the trailing window ending at sample k (none before `from`). */
export function trailingRate(
  series: StepSeries,
  k: number,
  from: number,
  windowSec: number,
): number | null {
  const tk = series.t[k]!;
  const start = Math.max(from, tk - windowSec);
  let j = k;
  while (j > 0 && series.t[j - 1]! >= start) j--;
  const span = tk - series.t[j]!;
  // Less than half the window since `from`: too short to call a rate.
  if (span < windowSec / 2) return null;
  return (series.accepted[k]! - series.accepted[j]!) / span;
}

function recoverTime(series: StepSeries, w: StepWindow, o: FigureOptions): Figure {
  const rates: { t: number; r: number }[] = [];
  for (let k = 0; k < series.t.length; k++) {
    const t = series.t[k]!;
    if (t <= w.recoverFrom || t > w.end) continue;
    const r = trailingRate(series, k, w.recoverFrom, o.rateWindowSec);
    if (r !== null) rates.push({ t, r });
  }
  if (rates.length === 0) {
    return {
      value: null,
      why: `no ${o.rateWindowSec} s of samples after ${fixed(w.recoverFrom, 1)} s`,
    };
  }
  const thr = w.recoverRatePerSec;
  if (!Number.isFinite(thr)) return { value: null, why: 'no rate to recover to' };
  const lastRate = rates[rates.length - 1]!;
  if (lastRate.r < thr) {
    return {
      value: null,
      why: `${fixed(lastRate.r, 1)}/s accepted at the end, below ${fixed(thr, 1)}/s`,
    };
  }
  let k = rates.length;
  while (k > 0 && rates[k - 1]!.r >= thr) k--;
  if (k === 0) return { value: 0, why: null };
  const held = lastRate.t - rates[k]!.t;
  if (held < o.holdSec) {
    return {
      value: null,
      why: `at or above ${fixed(thr, 1)}/s only for the last ${fixed(held, 1)} s`,
    };
  }
  return { value: rates[k]!.t - w.recoverFrom, why: null };
}

/** A figure for a table cell: the number, or "never (why)" (or another word than never). */
export function figureText(f: Figure, digits = 1, word = 'never'): string {
  return f.value === null ? `${word} (${f.why})` : f.value.toFixed(digits);
}
