/**
 * The accuracy contract as maths (docs/GATEWAY.md, "Accuracy contract"): how far over and
 * under its limit a key can be admitted in a window, from the settings and the failures.
 * Pure functions; the simulation checks every window against them.
 */
import { insuredPoints, underAdmissionBound } from '../../quota/limits.js';

export interface ContractTerms {
  /** The key's effective limit per window. */
  limit: number;
  /** Gateways sharing the quota (quotas.gateways, set to the true count). */
  gateways: number;
  /** Worker processes per gateway. */
  workers: number;
  leases: boolean;
}

/** Gateway processes that each lease and insure on their own. */
export function holdersOf(t: ContractTerms): number {
  return Math.max(1, t.gateways) * Math.max(1, t.workers);
}

/**
 * Points every process together admits from its insured share while Valkey fails, in one
 * window of `spanMs` (a window merged across a failover is longer than `windowMs`): each
 * holds a fixed window of its own, so up to ceil(span / window) + 1 of them overlap it.
 */
export function insuredCap(t: ContractTerms, spanMs: number, windowMs: number): number {
  const windows = Math.ceil(spanMs / windowMs - 1e-9) + 1;
  return holdersOf(t) * insuredPoints(t.limit, t.gateways) * windows;
}

/**
 * The most one window of a key may be admitted over its limit, given what happened to it:
 * `lost` points of its counter lost by a failover (a replica re-grants at most those, and
 * never more than the limit), and whether any process admitted it from its insured share.
 * Leases add nothing of their own: nothing is spent that Valkey did not grant.
 */
export function windowOverBound(
  t: ContractTerms,
  lost: number,
  insured: boolean,
  spanMs: number,
  windowMs: number,
): number {
  return Math.min(lost, t.limit) + (insured ? insuredCap(t, spanMs, windowMs) : 0);
}

/**
 * The same bound from the settings alone, before any run: a failover that loses the last
 * `lostMs` of writes loses what the key was granted in them, its writes at `ratePerSec`
 * (points a second) and what every holder held unspent, at most the under-admission bound.
 */
export function configOverBound(
  t: ContractTerms,
  failover: { lostMs: number; ratePerSec: number } | undefined,
  storeFails: boolean,
): number {
  let bound = 0;
  if (failover) {
    const held = t.leases ? underAdmissionBound(t.limit, holdersOf(t)) : 0;
    bound += Math.min(t.limit, Math.ceil((failover.ratePerSec * failover.lostMs) / 1000) + held);
  }
  // A store failure opens every process's breaker: each insures a share for up to two windows.
  if (storeFails) bound += 2 * holdersOf(t) * insuredPoints(t.limit, t.gateways);
  return bound;
}

/** Points one key can lose to leases in a window (none without leases). */
export function underBound(t: ContractTerms): number {
  return t.leases ? underAdmissionBound(t.limit, holdersOf(t)) : 0;
}
