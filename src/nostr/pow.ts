/**
 * NIP-13 proof of work: the difficulty of an event is the number of leading zero bits of its
 * id, capped by the target its `nonce` tag commits to (work found by luck beyond the target
 * does not count). Pure maths: the caller makes sure the id is the hash of the event.
 */
import { getPow } from 'nostr-tools/nip13';

/** The target of the first `["nonce", <n>, <target>]` tag, if it commits one. */
export function committedTarget(tags: readonly (readonly string[])[]): number | undefined {
  const nonce = tags.find((tag) => tag[0] === 'nonce');
  const target = nonce?.[2];
  return target !== undefined && /^\d{1,3}$/.test(target) ? Number(target) : undefined;
}

/** The difficulty an event is credited with: its id's leading zero bits, at most its target. */
export function workDone(id: string, tags: readonly (readonly string[])[]): number {
  const bits = getPow(id);
  const target = committedTarget(tags);
  return target === undefined ? bits : Math.min(bits, target);
}

export interface PowDiscount {
  /** Each whole `perBits` of difficulty above the minimum multiplies the cost by `factor`. */
  perBits: number;
  factor: number;
}

/**
 * The cost of an event credited with `difficulty`: `cost x factor^steps`, steps the whole
 * `perBits` above `minDifficulty`, rounded up and never below 1. Work lowers a price; it never
 * makes an event free (only a kind priced 0 is), and rounding never undercuts the discount.
 */
export function discountedCost(
  cost: number,
  difficulty: number,
  minDifficulty: number,
  discount: PowDiscount | undefined,
): number {
  if (!discount || cost === 0) return cost;
  const steps = Math.floor(Math.max(0, difficulty - minDifficulty) / discount.perBits);
  return Math.max(1, Math.ceil(cost * discount.factor ** steps));
}
