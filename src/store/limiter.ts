import { RateLimiterRes } from 'rate-limiter-flexible';
import type { RateLimiterAbstract, RateLimiterStoreAbstract } from 'rate-limiter-flexible';
import type { ClientConnection } from './clients/driver.js';
import { StoreError, describeError } from './errors.js';
import type { ClientKey } from './keys.js';

export interface LimiterOptions {
  /** Shared by every limiter of one quota, whatever its points: they share the counter key. */
  keyPrefix: string;
  /** Points per window; an integer (the Redis-family limiters require it). */
  points: number;
  /** Window length in seconds. */
  duration: number;
  /** Used instead of the store when a store call fails. */
  insuranceLimiter?: RateLimiterAbstract;
}

/** The outcome of one consume: admitted or not, with the numbers rate-limit headers need. */
export interface Decision {
  allowed: boolean;
  limit: number;
  consumed: number;
  remaining: number;
  msBeforeNext: number;
}

/**
 * A limiter on the store. consume() resolves with a Decision for both admitted and rejected
 * requests, and throws StoreError only when the store failed: a failure can never be mistaken
 * for a rejection.
 */
export class QuotaLimiter {
  constructor(
    private readonly inner: RateLimiterStoreAbstract,
    readonly points: number,
  ) {}

  /**
   * One round trip. The library's own in-memory block is not used: it holds every blocked key
   * until its window ends, however many there are; quota/consumers.ts has a bounded one.
   */
  async consume(key: ClientKey, points = 1): Promise<Decision> {
    let allowed = true;
    let res: RateLimiterRes;
    try {
      res = await this.inner.consume(key, points);
    } catch (outcome) {
      if (!(outcome instanceof RateLimiterRes)) {
        throw new StoreError(`quota store failed: ${describeError(outcome)}`, { cause: outcome });
      }
      allowed = false;
      res = outcome;
    }
    return this.decision(allowed, res);
  }

  /**
   * Take `points` back from the key's counter (one round trip). Where the window has ended,
   * the library starts a new one below 0: callers refund only within the window they charged.
   */
  async reward(key: ClientKey, points: number): Promise<void> {
    try {
      await this.inner.reward(key, points);
    } catch (err) {
      throw new StoreError(`quota store failed: ${describeError(err)}`, { cause: err });
    }
  }

  /** Current consumption without consuming; null when the key has no counter. */
  async peek(key: ClientKey): Promise<Decision | null> {
    try {
      const res = await this.inner.get(key);
      return res ? this.decision(res.consumedPoints <= this.points, res) : null;
    } catch (err) {
      throw new StoreError(`quota store failed: ${describeError(err)}`, { cause: err });
    }
  }

  private decision(allowed: boolean, res: RateLimiterRes): Decision {
    return {
      allowed,
      limit: this.points,
      consumed: res.consumedPoints,
      remaining: allowed ? Math.max(0, this.points - res.consumedPoints) : 0,
      msBeforeNext: res.msBeforeNext,
    };
  }
}

/** A limiter of the connection's library (its driver picks rate-limiter-flexible's class). */
export function buildLimiter(
  conn: Pick<ClientConnection, 'limiter'>,
  opts: LimiterOptions,
): QuotaLimiter {
  if (!Number.isInteger(opts.points) || opts.points < 0) {
    throw new RangeError(`limiter points must be a non-negative integer, got ${opts.points}`);
  }
  const inner = conn.limiter({
    keyPrefix: opts.keyPrefix,
    points: opts.points,
    duration: opts.duration,
    ...(opts.insuranceLimiter ? { insuranceLimiter: opts.insuranceLimiter } : {}),
  });
  return new QuotaLimiter(inner, opts.points);
}
