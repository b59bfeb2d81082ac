/**
 * Valkey's quota counters in process, for unit tests of the decider: fixed windows in a Map,
 * one per (prefix, key) and shared by every limiter of a prefix (as the real counters are),
 * behind the real QuotaLimiter; and a clock the test moves by hand.
 */
import { RateLimiterRes } from 'rate-limiter-flexible';
import type { RateLimiterStoreAbstract } from 'rate-limiter-flexible';
import type { ClientKey, LimiterOptions, Store } from '../../src/store/index.js';
import { QuotaLimiter } from '../../src/store/limiter.js';

/** A clock the test moves by hand. */
export function manualClock(start = 1_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

/** Valkey's counters in a Map: one per (prefix, key), shared by the limiters of a prefix. */
export class FakeValkey {
  readonly counters = new Map<string, { consumed: number; endsAt: number }>();
  /** Consumes that reached the store (not answered from memory). */
  calls = 0;
  /** Every call fails (as a store that is down) while set. */
  failing = false;

  constructor(private readonly now: () => number) {}

  /** What a counter holds now (0 when it has none or its window ended). */
  consumed(id: string): number {
    const c = this.counters.get(id);
    return c && c.endsAt > this.now() ? c.consumed : 0;
  }

  readonly store = {
    limiter: (opts: LimiterOptions) => {
      const current = (k: ClientKey) => {
        const c = this.counters.get(`${opts.keyPrefix}:${k}`);
        return c && c.endsAt > this.now() ? c : undefined;
      };
      const inner = {
        consume: (k: ClientKey, points: number) => {
          this.calls++;
          if (this.failing) return Promise.reject(new Error('valkey is down'));
          const now = this.now();
          let c = current(k);
          if (!c) {
            c = { consumed: 0, endsAt: now + opts.duration * 1000 };
            this.counters.set(`${opts.keyPrefix}:${k}`, c);
          }
          c.consumed += points;
          const res = new RateLimiterRes(
            Math.max(0, opts.points - c.consumed),
            c.endsAt - now,
            c.consumed,
          );
          // As rate-limiter-flexible does: a refusal rejects with the result, not an Error.
          // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
          return c.consumed > opts.points ? Promise.reject(res) : Promise.resolve(res);
        },
        get: (k: ClientKey) => {
          if (this.failing) return Promise.reject(new Error('valkey is down'));
          const c = current(k);
          return Promise.resolve(
            c
              ? new RateLimiterRes(
                  Math.max(0, opts.points - c.consumed),
                  c.endsAt - this.now(),
                  c.consumed,
                )
              : null,
          );
        },
      } as unknown as RateLimiterStoreAbstract;
      return new QuotaLimiter(inner, opts.points);
    },
  } as unknown as Store;
}
