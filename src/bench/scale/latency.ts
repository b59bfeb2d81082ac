/**
 * Latency and service-time draws for the Valkey model, from a seeded uniform source: pure
 * functions of the draws, so a configuration and a seed give one run.
 */

/** One network hop: a lognormal body with a rare slow tail (a GC pause, a busy NIC). */
export interface HopLatency {
  /** Median one-way latency, ms. */
  medianMs: number;
  /** Lognormal shape (sigma of the log). */
  sigma: number;
  /** Probability of a tail draw, and its extra delay (uniform up to this), ms. */
  tailP: number;
  tailMs: number;
  /**
   * Round trips measured on the host the run is compared with (a probe beside the real run):
   * when given, each command's way out draws one of them whole, its way back is free, so the
   * model's round trips have the host's own distribution (its scheduling, its client).
   */
  roundTripsMs?: readonly number[] | undefined;
}

export const LOOPBACK_HOP: HopLatency = { medianMs: 0.05, sigma: 0.4, tailP: 0.001, tailMs: 1 };
export const DATACENTER_HOP: HopLatency = {
  medianMs: 0.15,
  sigma: 0.5,
  tailP: 0.001,
  tailMs: 5,
};

/** A standard normal draw from two uniforms (Box-Muller). */
export function normal(u1: number, u2: number): number {
  return Math.sqrt(-2 * Math.log(Math.max(u1, 1e-12))) * Math.cos(2 * Math.PI * u2);
}

/** One hop's latency in ms from three uniforms in [0, 1). */
export function hopMs(h: HopLatency, u1: number, u2: number, u3: number): number {
  const body = h.medianMs * Math.exp(h.sigma * normal(u1, u2));
  return u3 < h.tailP ? body + (u3 / h.tailP) * h.tailMs : body;
}

/** One leg of a round trip: out (to Valkey) or back (the reply), ms. */
export function legMs(
  h: HopLatency,
  leg: 'out' | 'back',
  u1: number,
  u2: number,
  u3: number,
): number {
  const measured = h.roundTripsMs;
  if (measured === undefined || measured.length === 0) return hopMs(h, u1, u2, u3);
  return leg === 'back'
    ? 0
    : measured[Math.min(measured.length - 1, Math.floor(u1 * measured.length))]!;
}

/** Exponential service time of mean `meanMs`. */
export function serviceMs(meanMs: number, u: number): number {
  return -meanMs * Math.log(1 - u);
}
