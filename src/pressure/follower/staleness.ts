/**
 * The gateway's view of one node's pressure feed: how fresh it is, and the multiplier to
 * enforce. Pure, with time passed in (seconds on a monotonic clock), so the rules are
 * tested in simulated time. A value is computed on demand, per request if need be: the
 * tracker keeps no timers and the up-slew is evaluated lazily.
 */

export type FeedState = 'cold' | 'fresh' | 'holding' | 'safe' | 'recovering';

export interface FeedTrackerParams {
  /** No report for this long makes the feed stale (a few of the feed's ticks). */
  staleAfterSec: number;
  /** A stale feed's last value is held this long before moving to the safe value. */
  holdSec: number;
  /**
   * Used with no data: strictly between 0 and 1, since "no data" is neither "no pressure"
   * nor "maximum pressure".
   */
  safeValue: number;
  /** Reports in a row, no gap longer than staleAfterSec, before a returning feed is trusted. */
  freshReportsToTrust: number;
  /** Most the enforced value may rise per second towards a trusted report; drops are at once. */
  rUpPerSec: number;
}

/**
 * Defaults: stale after 3 s (three missed 1 s ticks, the feed's lease), held 5 s, so the
 * safe value is in force 8 s after the feed died (the target is 10 s); 3 reports before a
 * returning feed is trusted; then 0.1 per second up, as fast as the feed's own law rises.
 */
export const DEFAULT_FEED_TRACKER_PARAMS: Readonly<FeedTrackerParams> = {
  staleAfterSec: 3,
  holdSec: 5,
  safeValue: 0.5,
  freshReportsToTrust: 3,
  rUpPerSec: 0.1,
};

export interface FeedValue {
  m: number;
  state: FeedState;
  /** Seconds since the last report; null before the first. */
  ageSec: number | null;
}

export interface FeedTracker {
  /** A report from the feed, received at `now`. */
  report(now: number, m: number): void;
  value(now: number): FeedValue;
}

function validate(p: FeedTrackerParams): void {
  if (!(p.safeValue > 0 && p.safeValue < 1)) {
    throw new RangeError(`feed tracker: safeValue must be strictly between 0 and 1`);
  }
  if (!(p.staleAfterSec > 0)) throw new RangeError('feed tracker: staleAfterSec must be > 0');
  if (!(p.holdSec >= 0)) throw new RangeError('feed tracker: holdSec must be >= 0');
  if (!(p.rUpPerSec > 0)) throw new RangeError('feed tracker: rUpPerSec must be > 0');
  if (!Number.isInteger(p.freshReportsToTrust) || p.freshReportsToTrust < 1) {
    throw new RangeError('feed tracker: freshReportsToTrust must be an integer >= 1');
  }
}

/**
 * cold (never heard) -> the safe value; recovering (heard, not yet trusted) -> what was
 * enforced, lowered at once by any lower report; fresh -> the report, rising at rUpPerSec;
 * stale -> the value reached when the feed went quiet, held for holdSec, then
 * min(that, safe): never above the last fresh value while stale. Time that runs backwards is
 * read as no time passing.
 */
export function createFeedTracker(params: Partial<FeedTrackerParams> = {}): FeedTracker {
  const p: FeedTrackerParams = { ...DEFAULT_FEED_TRACKER_PARAMS, ...params };
  validate(p);
  let lastReportAt: number | undefined;
  let streak = 0;
  // The enforced value moves from `from` (at time `since`) towards `goal` at rUpPerSec.
  let from = p.safeValue;
  let since = 0;
  let goal = p.safeValue;

  const ramp = (at: number) =>
    goal <= from ? goal : Math.min(goal, from + p.rUpPerSec * Math.max(0, at - since));

  function value(now: number): FeedValue {
    if (lastReportAt === undefined) return { m: p.safeValue, state: 'cold', ageSec: null };
    const ageSec = Math.max(0, now - lastReportAt);
    if (ageSec <= p.staleAfterSec) {
      return {
        m: ramp(now),
        state: streak >= p.freshReportsToTrust ? 'fresh' : 'recovering',
        ageSec,
      };
    }
    // The ramp stops where it was when the feed went quiet.
    const held = ramp(lastReportAt + p.staleAfterSec);
    if (ageSec <= p.staleAfterSec + p.holdSec) return { m: held, state: 'holding', ageSec };
    return { m: Math.min(held, p.safeValue), state: 'safe', ageSec };
  }

  return {
    value,
    report(now: number, m: number): void {
      if (!Number.isFinite(m) || m < 0 || m > 1) {
        throw new RangeError(`a reported multiplier must be within [0, 1], got ${m}`);
      }
      const at = lastReportAt === undefined ? now : Math.max(now, lastReportAt);
      const current = value(at);
      const gap = current.ageSec === null || current.ageSec > p.staleAfterSec;
      streak = gap ? 1 : streak + 1;
      lastReportAt = at;
      from = current.m;
      since = at;
      // Untrusted reports may only lower the value; trusted ones set where it heads.
      goal = streak >= p.freshReportsToTrust ? m : Math.min(current.m, m);
    },
  };
}
