/**
 * Work instead of refusal under pressure (nostr.pow.adaptive): while a relay node's
 * multiplier m is below 1, an event whose author holds no tier and whose connection did not
 * authenticate must carry more NIP-13 work, rising as m falls. Each halving of m asks
 * `bitsPerHalving` more leading zero bits, each bit doubling the expected hashing, so a
 * spam wave of fresh keys on fixed hardware is held to about m^bitsPerHalving of its rate,
 * while members write on at their quota. Pure.
 */

export interface AdaptiveWork {
  enabled: boolean;
  /** Leading zero bits asked for each halving of the multiplier. */
  bitsPerHalving: number;
  /** The most ever asked (also what m = 0 asks). */
  maxDifficulty: number;
}

/** The difficulty in force at multiplier `m`: `minDifficulty` at m >= 1 or when off. */
export function requiredDifficulty(
  m: number,
  minDifficulty: number,
  adaptive: AdaptiveWork | undefined,
): number {
  if (!adaptive?.enabled || !(m < 1)) return minDifficulty;
  const cap = Math.max(minDifficulty, adaptive.maxDifficulty);
  if (!(m > 0)) return cap;
  const extra = Math.ceil(adaptive.bitsPerHalving * Math.log2(1 / m) - 1e-9);
  return Math.min(cap, minDifficulty + extra);
}
