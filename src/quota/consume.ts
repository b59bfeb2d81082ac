/**
 * One consume contract for every quota counter, composed as rate-limiter-flexible composes
 * its own limiters (RLWrapperBlackAndWhite, BurstyRateLimiter and the insurance limiter wrap
 * a limiter and are one): the plain limiter on Valkey is the source, and the lease book, the
 * in-memory block, the store breaker and the insurance share each wrap a Consumer
 * (consumers.ts). The decider turns the final verdict into a decision in one place.
 */
import type { ClientKey, StoreError } from '../store/index.js';
import type { Maybe } from '../util/maybe.js';

/** A verdict some counter reached: Valkey's, this process's memory, or the insured share. */
export interface Judged {
  readonly failed: false;
  admitted: boolean;
  /** The points judged against: the limit, or this gateway's share while Valkey is down. */
  limit: number;
  remaining: number;
  /** Milliseconds until more points are available (the counter's window ends). */
  msBeforeNext: number;
  /** The counter after this consume, as the judge knows it (0 when answered from memory). */
  consumed: number;
  /** Nothing more is to be had this window: an in-memory block may hold the key till its end. */
  exhausted: boolean;
  /** Valkey (itself, or points leased from it), this process's block, or the insured share. */
  by: 'store' | 'memory' | 'insurance';
  /** Valkey was asked: the breaker times these calls. */
  roundTrip: boolean;
  /** Where the cost was counted, for a refund: nowhere (undefined) when the consume took nothing. */
  counted: Receipt['into'] | undefined;
}

/**
 * Where a consume's points were counted and till when that count lasts: a refund returns
 * them there and nowhere else (an insured charge to the insured share, never to Valkey), and
 * only within the window they were counted in (a refund in the next one would be a gift).
 */
export interface Receipt {
  readonly into: 'store' | 'insurance';
  /** When the window the points were counted in ends (epoch ms, as the decider's clock reads). */
  readonly until: number;
}

/** Valkey failed (or is being skipped after a failure): no counter judged the request. */
export interface Failed {
  readonly failed: true;
  readonly error: StoreError;
}

export type Verdict = Judged | Failed;

/**
 * Charge `cost` points to `key`. Gives a verdict for admissions, refusals and store failures
 * alike (a failure is never mistaken for a refusal), at once when memory decides (a leased
 * point, a block), else a promise of it; throws or rejects only on a bug.
 */
export interface Consumer {
  /** `nodeId`: the relay node the request goes to (leases are clipped by its multiplier). */
  consume(key: ClientKey, cost: number, nodeId: string): Maybe<Verdict>;
  /**
   * Give back `cost` points a consume counted (its receipt): the write they paid for was not
   * done (the relay refused it, or had it already). Best effort: resolves false when nothing
   * was given back (Valkey failed or is being skipped); rejects only on a bug.
   */
  refund(key: ClientKey, cost: number, receipt: Receipt): Promise<boolean>;
}

/** Called with the duration of each call that reached Valkey. */
export interface DecisionObserver {
  storeCall(seconds: number, ok: boolean): void;
}

/** A refusal from this process's memory, without a round trip. */
export function refusedFromMemory(limit: number, msBeforeNext: number): Judged {
  return {
    failed: false,
    admitted: false,
    limit,
    remaining: 0,
    msBeforeNext,
    consumed: 0,
    exhausted: true,
    by: 'memory',
    roundTrip: false,
    counted: undefined,
  };
}
