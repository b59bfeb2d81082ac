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
