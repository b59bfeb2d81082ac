/**
 * Who the load claims to be. Each request names one of `keys` client identities, drawn
 * uniformly or by a Zipf law (a few heavy hitters, a long tail), from a seeded generator so a
 * run can be reproduced. The gateway hashes each identity into its own hash tag, so many
 * identities spread across every cluster slot.
 */
import { seededRandom } from '../../util/random.js';

export type KeyDistribution = 'uniform' | 'zipf';

export interface KeyPlan {
  keys: number;
  distribution: KeyDistribution;
  /** s in P(rank k) ∝ 1 / k^s; used when distribution is zipf. */
  zipfExponent: number;
  seed: number;
}

/** The client address of identity i: 10.0.0.0/8, so up to 16.7 million distinct clients. */
export function clientAddress(i: number): string {
  if (!Number.isInteger(i) || i < 0 || i >= 2 ** 24) throw new RangeError(`identity ${i}`);
  return `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
}

/**
 * The client address of identity i as an IPv6 client (--ipv6-clients): a /64 of its own,
 * 256 to a /56 and 65,536 to a /48 (as the IPv4 addresses are 256 to a /24), so that
 * --ranges charges each write its /56 and its /48.
 */
export function clientAddressV6(i: number): string {
  if (!Number.isInteger(i) || i < 0 || i >= 2 ** 24) throw new RangeError(`identity ${i}`);
  return `2001:db8:${(i >> 16).toString(16)}:${(i & 0xffff).toString(16)}::1`;
}

/** Cumulative Zipf probabilities over ranks 1..n (the last is exactly 1). */
export function zipfCdf(n: number, s: number): Float64Array {
  const cdf = new Float64Array(n);
  let sum = 0;
  for (let k = 1; k <= n; k++) sum += 1 / k ** s;
  let acc = 0;
  for (let k = 1; k <= n; k++) {
    acc += 1 / k ** s / sum;
    cdf[k - 1] = acc;
  }
  cdf[n - 1] = 1;
  return cdf;
}

/** First index whose cumulative probability reaches u (binary search). */
function firstAtLeast(cdf: Float64Array, u: number): number {
  let lo = 0;
  let hi = cdf.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (cdf[mid]! >= u) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/**
 * A sampler of identity indexes 0..keys-1. Under Zipf, index 0 is the heaviest hitter;
 * the ranks are not shuffled because the gateway's hash already scatters them over slots.
 */
export function keySampler(plan: KeyPlan): () => number {
  if (!Number.isInteger(plan.keys) || plan.keys < 1) {
    throw new RangeError(`keys must be a positive integer, got ${plan.keys}`);
  }
  const random = seededRandom(plan.seed);
  if (plan.distribution === 'uniform') return () => Math.floor(random() * plan.keys);
  if (!(plan.zipfExponent > 0)) {
    throw new RangeError(`zipf exponent must be > 0, got ${plan.zipfExponent}`);
  }
  const cdf = zipfCdf(plan.keys, plan.zipfExponent);
  return () => firstAtLeast(cdf, random());
}

/**
 * Identities 0..floor(share x keys)-1 are the flooders: far over their limit. With a uniform
 * draw, that is also their share of requests; under Zipf they are the heavy hitters.
 */
export function isFlooder(index: number, keys: number, floodShare: number): boolean {
  return index < Math.floor(floodShare * keys);
}

/** The API key the load sends for identity i (flood workload: tiers ride on API keys). */
export function apiKeyOf(i: number): string {
  return `bench-client-${i}`;
}
