/**
 * The maths of effective limits, kept pure: limit = base x multiplier, with the multiplier
 * quantised so that a gateway holds one limiter per step rather than one per value.
 */

/**
 * Quantise down to the step (never admit more than base x m), within [0, 1]. A positive
 * multiplier keeps at least one step: only an explicit 0 stops all writes (a law that
 * publishes 0.02 means "very few", not "none").
 */
export function quantiseMultiplier(m: number, step: number): number {
  if (!(m > 0)) return 0;
  if (m >= 1) return 1;
  const steps = Math.max(1, Math.floor(m / step + 1e-9));
  return Number((steps * step).toFixed(6));
}

/**
 * Points for a base quota under a multiplier. At least one point while the multiplier is
 * above zero, so rounding alone never shuts a client out; zero only when m is zero.
 */
export function effectivePoints(base: number, m: number, step: number): number {
  const q = quantiseMultiplier(m, step);
  if (q === 0 || base === 0) return 0;
  return Math.max(1, Math.floor(base * q));
}

/** Whole seconds until `ms` has passed, at least 1 while any time remains. */
export function secondsUntil(ms: number): number {
  return ms > 0 ? Math.max(1, Math.ceil(ms / 1000)) : 0;
}

/** This gateway's share of a quota when Valkey is unreachable: never more than the whole. */
export function insuredPoints(points: number, gateways: number): number {
  return points === 0 ? 0 : Math.max(1, Math.ceil(points / gateways));
}

/** The most points one gateway process leases of one key at once. */
export const MAX_LEASE = 64;

/**
 * The next lease to ask for, after asking for `wanted` and being granted `granted`: a lease
 * granted whole lets the next one be as large as the key's rate asks (leaseForRate, up to
 * MAX_LEASE); one that was clipped (the limit is near, or the store's share rule cut it)
 * asks for what it got, down to 1.
 */
export function nextLeaseSize(wanted: number, granted: number): number {
  return granted >= wanted ? MAX_LEASE : Math.max(1, granted);
}

/**
 * The most a lease should hold for a key that spent `lastGranted` points in the `msSince` ms
 * since its last take: what it writes at that rate in the `msLeft` ms its window has left
 * (points past the window would lapse unspent). A key with no known rate (its first take)
 * takes 1. At least 1.
 */
export function leaseForRate(lastGranted: number, msSince: number, msLeft: number): number {
  if (!(lastGranted > 0)) return 1;
  return Math.max(1, Math.floor((msLeft * lastGranted) / Math.max(1, msSince)));
}

/** A key's lease goes back after this many of its mean gaps between writes unused. */
export const IDLE_GAPS = 3;

/**
 * How long a key holding points may go unused before they go back: `idleMs`, or IDLE_GAPS
 * of its mean gap between writes (`lastGranted` points spent in `msSince` ms) when that is
 * longer, so that a client writing every 20 s keeps its lease from one write to the next;
 * never longer than its window, whose end lapses them anyway.
 */
export function idleAfter(
  lastGranted: number,
  msSince: number,
  idleMs: number,
  windowMs: number,
): number {
  if (!(lastGranted > 0)) return idleMs;
  const gapMs = Math.max(1, msSince) / lastGranted;
  return Math.max(idleMs, Math.min(windowMs, IDLE_GAPS * gapMs));
}

/**
 * What a take beyond its need may get of the points left: at most left / (2 x holders), so
 * the holders together never corner more than half of what is left.
 */
export function leaseDivisor(holders: number): number {
  return 2 * Math.max(1, holders);
}

/**
 * Points one identity can lose to leases per window: every holder keeping its largest lease
 * unspent. At most MAX_LEASE each, and never more than the share rule lets one take of the
 * whole limit. Idle hand-backs and shutdown return them sooner.
 */
export function underAdmissionBound(limit: number, holders: number): number {
  const h = Math.max(1, holders);
  const perHolder = Math.min(MAX_LEASE, Math.max(1, Math.floor(limit / leaseDivisor(h))));
  return Math.min(limit, h * perHolder);
}
