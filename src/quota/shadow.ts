import type { QuotaDecision } from './decider.js';

/** How often, at most, a shadow-mode refusal is logged (each line counts the ones it stands for). */
export const SHADOW_LOG_INTERVAL_MS = 1000;

/**
 * A decision under shadow mode: a quota refusal becomes an admission marked shadow_limited,
 * with its headers (r=0) intact. A failure of the quota store (outcome error) is not a quota
 * decision and keeps what quotas.onStoreFailure decided.
 */
export function shadowed(d: QuotaDecision): QuotaDecision {
  if (d.admitted || d.outcome === 'error') return d;
  return { ...d, outcome: 'shadow_limited', admitted: true };
}
